//! Numbers for people: sizes, download rates and time left.

/// `1536` → `1.5 KB`, `83_886_080` → `83.9 MB` (decimal units, as browsers show downloads).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `75.0` → `1 min 15 s`; under a minute in seconds, over an hour in hours and minutes.
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "—".into();
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// Download rate and time left from progress samples: an exponentially weighted rate over
/// network bytes only (bytes read from the cache arrive at once and would make the estimate lie).
#[derive(Clone, Debug, Default)]
pub struct RateMeter {
    last: Option<(f64, u64)>,
    rate: Option<f64>,
}

impl RateMeter {
    /// Records that `network_bytes` had arrived by `now_ms`.
    pub fn sample(&mut self, now_ms: f64, network_bytes: u64) {
        if let Some((t, b)) = self.last {
            let dt = (now_ms - t) / 1e3;
            if dt < 0.2 {
                return;
            }
            let r = network_bytes.saturating_sub(b) as f64 / dt;
            self.rate = Some(match self.rate {
                Some(old) => 0.7 * old + 0.3 * r,
                None => r,
            });
        }
        self.last = Some((now_ms, network_bytes));
    }

    /// Bytes per second, once two samples are far enough apart.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Seconds until `remaining` more bytes arrive at the current rate.
    pub fn eta(&self, remaining: u64) -> Option<f64> {
        self.rate.filter(|r| *r > 1.0).map(|r| remaining as f64 / r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1536), "1.5 KB");
        assert_eq!(bytes(83_886_080), "83.9 MB");
        assert_eq!(bytes(2_280_000_000), "2.3 GB");
        assert_eq!(duration(4.4), "4 s");
        assert_eq!(duration(75.0), "1 min 15 s");
        assert_eq!(duration(7260.0), "2 h 1 min");
        assert_eq!(duration(f64::NAN), "—");
    }

    #[test]
    fn rate_and_eta_follow_the_samples() {
        let mut m = RateMeter::default();
        assert_eq!(m.eta(100), None);
        m.sample(0.0, 0);
        m.sample(100.0, 50); // too close to the last sample: ignored
        assert_eq!(m.rate(), None);
        m.sample(1000.0, 1_000_000);
        assert!((m.rate().unwrap_or(0.0) - 1e6).abs() < 1.0);
        m.sample(2000.0, 1_500_000); // 0.5 MB/s now: the estimate moves towards it
        let r = m.rate().unwrap_or(0.0);
        assert!(r < 1e6 && r > 0.5e6, "{r}");
        let eta = m.eta(3_000_000).unwrap_or(0.0);
        assert!((eta - 3e6 / r).abs() < 1e-9);
    }
}
