//! Browser plumbing shared by the page and the worker. HTTP goes through `gloo-net` (its
//! `fetch` binding works in the page and in the worker); what gloo lacks stays here: reading a
//! body chunk by chunk for progress, the Cache API, storage estimates, readable errors from
//! JavaScript values.

use gloo_net::http::{Request, Response};
use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, RequestCache};

/// The cache that keeps bundle files between visits.
pub const CACHE_NAME: &str = "lorekeeper-bundles-v1";

/// A JavaScript error in words (`QuotaExceededError: …`, an `Error`'s message, or the value).
pub fn js_error(e: &JsValue) -> String {
    if let Some(d) = e.dyn_ref::<web_sys::DomException>() {
        return format!("{}: {}", d.name(), d.message());
    }
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

/// The name of a `DOMException` (`QuotaExceededError`), if `e` is one.
pub fn dom_error_name(e: &JsValue) -> Option<String> {
    e.dyn_ref::<web_sys::DomException>().map(|d| d.name())
}

/// Milliseconds since an arbitrary origin (`performance.now()`).
pub fn now_ms() -> f64 {
    lorekeeper_engine::generate::now_ms()
}

pub(crate) fn get(o: &JsValue, k: &str) -> Option<JsValue> {
    Reflect::get(o, &JsValue::from_str(k))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

/// A `gloo-net` error in words: the JavaScript error's message, as [`js_error`] words an
/// `Error` (`fetch()` rejects with a `TypeError`; gloo's own `Display` would prefix its name),
/// or gloo's own text.
fn net_error(e: gloo_net::Error) -> String {
    match e {
        gloo_net::Error::JsError(e) => e.message,
        e => e.to_string(),
    }
}

/// Why a request failed, in words, and whether asking again may help: the network failed or
/// the body broke off (`retry`), against an answer the server meant (an error status, a
/// redirect off the site).
#[derive(Debug)]
pub struct NetError {
    /// What happened, naming the URL.
    pub message: String,
    /// Asking again may help.
    pub retry: bool,
}

/// GETs `url` (same origin). `revalidate`: ask the server even if the HTTP cache has a copy
/// (manifests); otherwise the HTTP cache may answer (content-addressed shards). A status other
/// than 2xx is an error naming the URL and the status.
pub async fn fetch(url: &str, revalidate: bool) -> Result<Response, String> {
    get_from(url, revalidate, 0).await.map_err(|e| e.message)
}

/// GETs `url` from byte `from` on (`Range: bytes=from-` when `from > 0`; the caller checks
/// that the answer is a `206` starting there, since a server may ignore the range and send
/// the whole file). Errors as [`fetch`], with [`NetError::retry`] set for network failures.
pub async fn get_from(url: &str, revalidate: bool, from: u64) -> Result<Response, NetError> {
    let mut req = Request::get(url);
    if revalidate {
        req = req.cache(RequestCache::NoCache);
    }
    if from > 0 {
        req = req.header("Range", &format!("bytes={from}-"));
    }
    let resp = req.send().await.map_err(|e| NetError {
        message: format!("could not download {url}: {}", net_error(e)),
        retry: true,
    })?;
    // A redirect may not take a bundle off the site the page came from.
    if resp.redirected() {
        same_origin(&resp.url()).map_err(|e| NetError {
            message: format!("could not download {url}: it redirects to {e}"),
            retry: false,
        })?;
    }
    if !resp.ok() {
        return Err(NetError {
            message: format!(
                "could not download {url}: HTTP {} {}",
                resp.status(),
                resp.status_text()
            ),
            // The server's own trouble may pass; a missing or forbidden file will not.
            retry: resp.status() >= 500,
        });
    }
    Ok(resp)
}

/// Where a `206 Partial Content` answer starts (`Content-Range: bytes START-END/TOTAL`);
/// `None` for a whole-file answer or an unreadable header.
pub fn range_start(resp: &Response) -> Option<u64> {
    if resp.status() != 206 {
        return None;
    }
    let cr = resp.headers().get("content-range")?;
    cr.strip_prefix("bytes ")?
        .split('-')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// A response body as text.
pub async fn text(resp: Response) -> Result<String, String> {
    resp.text().await.map_err(net_error)
}

/// A response body as bytes, all at once.
pub async fn bytes(resp: Response) -> Result<Vec<u8>, String> {
    resp.binary().await.map_err(net_error)
}

/// A response body read chunk by chunk onto the end of `out`, calling `on_chunk(bytes)` as
/// each arrives. On an error (the connection broke off) `out` keeps every byte that arrived,
/// so the caller can ask for the rest.
pub async fn read_body(
    resp: Response,
    out: &mut Vec<u8>,
    mut on_chunk: impl FnMut(u64),
) -> Result<(), String> {
    let Some(body) = resp.body() else {
        let b = bytes(resp).await?;
        on_chunk(b.len() as u64);
        out.extend_from_slice(&b);
        return Ok(());
    };
    let reader: web_sys::ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    loop {
        let r = JsFuture::from(reader.read())
            .await
            .map_err(|e| format!("the download broke off: {}", js_error(&e)))?;
        if get(&r, "done").and_then(|d| d.as_bool()).unwrap_or(false) {
            break;
        }
        let Some(v) = get(&r, "value") else { continue };
        let chunk: Uint8Array = v.unchecked_into();
        let n = chunk.length() as usize;
        let start = out.len();
        out.resize(start + n, 0);
        chunk.copy_to(&mut out[start..]);
        on_chunk(n as u64);
    }
    Ok(())
}

/// Opens the bundle cache, or says why there is none (private mode, insecure origin).
pub async fn open_cache() -> Result<Cache, String> {
    let global = js_sys::global();
    let caches: web_sys::CacheStorage = get(&global, "caches")
        .ok_or("this browser offers no Cache API here (it needs https or localhost)")?
        .unchecked_into();
    let c = JsFuture::from(caches.open(CACHE_NAME))
        .await
        .map_err(|e| js_error(&e))?;
    Ok(c.unchecked_into())
}

/// The cached response for `url`, if any.
pub async fn cache_match(cache: &Cache, url: &str) -> Option<Response> {
    let r = JsFuture::from(cache.match_with_str(url)).await.ok()?;
    r.dyn_into::<web_sys::Response>().ok().map(Response::from)
}

/// Stores `data` as the response for `url`. The error keeps the `DOMException` so the caller
/// can tell a full disk (`QuotaExceededError`) from anything else.
pub async fn cache_put(cache: &Cache, url: &str, data: &[u8]) -> Result<(), JsValue> {
    let arr = Uint8Array::from(data);
    let resp = web_sys::Response::new_with_opt_buffer_source(Some(&arr))?;
    JsFuture::from(cache.put_with_str(url, &resp)).await?;
    Ok(())
}

/// Deletes `url` from the cache (a corrupt copy, an old shard).
pub async fn cache_delete(cache: &Cache, url: &str) {
    let _ = JsFuture::from(cache.delete_with_str(url)).await;
}

/// Every URL in the cache.
pub async fn cache_urls(cache: &Cache) -> Vec<String> {
    let Ok(keys) = JsFuture::from(cache.keys()).await else {
        return Vec::new();
    };
    js_sys::Array::from(&keys)
        .iter()
        .filter_map(|r| r.dyn_into::<web_sys::Request>().ok())
        .map(|r| r.url())
        .collect()
}

/// Free storage in bytes (`quota − usage`), when the browser gives an estimate.
pub async fn storage_free() -> Option<u64> {
    let nav = get(&js_sys::global(), "navigator")?;
    let storage: web_sys::StorageManager = get(&nav, "storage")?.unchecked_into();
    let est = JsFuture::from(storage.estimate().ok()?).await.ok()?;
    let quota = get(&est, "quota")?.as_f64()?;
    let usage = get(&est, "usage").and_then(|u| u.as_f64()).unwrap_or(0.0);
    Some((quota - usage).max(0.0) as u64)
}

/// Asks the browser to keep this site's storage (the cached bundle) under storage pressure
/// (`navigator.storage.persist()`, page only); whether it agreed.
pub async fn persist_storage() -> bool {
    let Some(storage) = get(&js_sys::global(), "navigator").and_then(|n| get(&n, "storage")) else {
        return false;
    };
    let storage: web_sys::StorageManager = storage.unchecked_into();
    let Ok(promise) = storage.persist() else {
        return false;
    };
    JsFuture::from(promise)
        .await
        .ok()
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

/// Does this context expose `navigator.gpu`?
pub fn has_webgpu() -> bool {
    get(&js_sys::global(), "navigator")
        .and_then(|n| get(&n, "gpu"))
        .is_some()
}

/// `url` resolved against this script's location, if it stays on this script's origin;
/// otherwise an error naming where it leads.
pub fn same_origin(url: &str) -> Result<String, String> {
    let location = get(&js_sys::global(), "location");
    let field = |k: &str| {
        location
            .as_ref()
            .and_then(|l| get(l, k))
            .and_then(|h| h.as_string())
            .unwrap_or_default()
    };
    let (base, origin) = (field("href"), field("origin"));
    let u = web_sys::Url::new_with_base(url, &base)
        .map_err(|e| format!("{url:?}, which is not an address ({})", js_error(&e)))?;
    if origin.is_empty() || u.origin() != origin {
        return Err(format!(
            "{}, off this site ({origin}); bundles are fetched same-origin only",
            u.href()
        ));
    }
    Ok(u.href())
}

/// `url` resolved against this script's location (the page or the worker script).
pub fn absolute(url: &str) -> String {
    let base = get(&js_sys::global(), "location")
        .and_then(|l| get(&l, "href"))
        .and_then(|h| h.as_string())
        .unwrap_or_default();
    web_sys::Url::new_with_base(url, &base)
        .map(|u| u.href())
        .unwrap_or_else(|_| url.to_string())
}
