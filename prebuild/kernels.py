"""Compiles the engine's CPU kernels (engine/csrc/*.cpp) into `var/kernels/<key>/libllm_kernels.so`.

The library is built for the machine it runs on (`-march=native`), against the installed torch's
headers and libraries, with the system C++ compiler: no ninja, no pybind. The folder's key hashes
everything the binary depends on (the sources, the flags, torch's version, the compiler's version
and the CPU's instruction-set flags), so an edit, an upgrade or another CPU type builds a new one
and an unchanged machine reuses the last build. A lock keeps concurrent set-ups from racing; the
library is written under a temporary name and renamed into place. Run: `python -m prebuild.kernels`.

Finding the key needs torch's version and C++ ABI, and importing torch for them costs a serving
start 1-1.5 s: they are kept in `var/kernels/.torch-<identity>.json`, keyed by the file identity
(artifacts/file_digests.py) of torch's version.py and compiled core, which a new torch install changes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fcntl
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from artifacts.file_digests import identity_of

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "engine" / "csrc"
KERNELS_DIR = ROOT / "var" / "kernels"
LIBRARY = "libllm_kernels.so"
FLAGS = ("-O3", "-std=c++20", "-fPIC", "-pthread", "-DNDEBUG", "-w")
ISA_FLAGS = (
    "avx2", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
    "amx_int8", "amx_bf16", "amx_tile", "fma", "f16c",
)  # fmt: skip


class KernelBuildError(RuntimeError):
    """The compiler refused the sources; the message carries its output."""


def _torch_paths() -> tuple[str, Path, Path, bool]:
    import torch

    base = Path(torch.__file__).parent
    return torch.__version__, base / "include", base / "lib", bool(torch._C._GLIBCXX_USE_CXX11_ABI)


def _torch_build(records: Path) -> tuple[str, bool]:
    """torch's version and C++ ABI: recorded in `records` for this install, else from torch."""
    spec = importlib.util.find_spec("torch")
    base = Path(spec.origin).parent if spec is not None and spec.origin else None
    core = sorted(base.glob("_C.*.so")) if base is not None else []
    if base is None or not core:
        version, _, _, abi = _torch_paths()  # not a layout we know: ask torch itself
        return version, abi
    install = [identity_of((base / "version.py").stat()), identity_of(core[0].stat())]
    record = records / f".torch-{hashlib.sha256(json.dumps(install).encode()).hexdigest()[:16]}.json"
    try:
        raw = json.loads(record.read_text())
        if raw["install"] == [list(i) for i in install]:
            return str(raw["version"]), bool(raw["abi"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    version, _, _, abi = _torch_paths()
    try:
        records.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"install": install, "version": version, "abi": abi}))
        tmp.replace(record)
    except OSError:
        pass  # read-only: the next start imports torch again
    return version, abi


def _cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = next((x for x in text.splitlines() if x.startswith(("flags", "Features"))), "")
    present = set(line.split(":", 1)[-1].split())
    return [f for f in ISA_FLAGS if f in present]


def _compiler() -> str:
    return os.environ.get("CXX", "g++")


def _flags() -> tuple[str, ...]:
    """The compiler flags: this machine's instruction set unless LLM_KERNELS_MARCH names another
    (e.g. x86-64-v2, to build and test the portable path on an AVX-512 machine)."""
    return (*FLAGS, f"-march={os.environ.get('LLM_KERNELS_MARCH', 'native')}")


def build_key(records: Path = KERNELS_DIR) -> str:
    """What the binary depends on, hashed: a new key means a new build. records: where torch's
    version and ABI are kept between processes."""
    version, abi = _torch_build(records)
    cxx = subprocess.run([_compiler(), "--version"], capture_output=True, text=True, check=False).stdout
    digest = hashlib.sha256()
    for part in (version, str(abi), cxx, " ".join(_flags()), " ".join(_cpu_flags())):
        digest.update(part.encode() + b"\0")
    for src in sorted(SOURCES.iterdir()):
        if src.suffix in (".cpp", ".h"):
            digest.update(src.name.encode() + b"\0" + src.read_bytes())
    return digest.hexdigest()[:16]


def _compile(src: Path, obj: Path, include: Path, abi: bool) -> None:
    cmd = [
        _compiler(), *_flags(), f"-D_GLIBCXX_USE_CXX11_ABI={int(abi)}",
        f"-I{include}", f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}",
        "-c", str(src), "-o", str(obj),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KernelBuildError(f"{src.name}: {done.stderr[-4000:]}")


def build(out: Path) -> None:
    """Compiles and links the library at `out` (two compilers at a time: the machines have 2 cores)."""
    _, include, lib, abi = _torch_paths()
    sources = sorted(SOURCES.glob("*.cpp"))
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        objs = [Path(tmp) / (s.stem + ".o") for s in sources]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            for f in [pool.submit(_compile, s, o, include, abi) for s, o in zip(sources, objs, strict=True)]:
                f.result()
        staged = Path(tmp) / LIBRARY
        link = [_compiler(), "-shared", *map(str, objs), f"-L{lib}", "-lc10", "-ltorch_cpu",
                f"-Wl,-rpath,{lib}", "-o", str(staged)]  # fmt: skip
        done = subprocess.run(link, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise KernelBuildError(f"link: {done.stderr[-4000:]}")
        staged.replace(out)


def ensure_kernels(kernels_dir: Path = KERNELS_DIR) -> Path:
    """The library for this machine and these sources, built first if it is not there yet."""
    folder = kernels_dir / build_key(kernels_dir)
    library = folder / LIBRARY
    if library.is_file():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    with open(kernels_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not library.is_file():  # another set-up may have built it while we waited
            build(library)
    return library


def load_kernels() -> str:
    """Builds (once) and loads the kernels into this process; returns the code path built."""
    from engine import kernels

    return kernels.load(ensure_kernels())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels-dir", type=Path, default=KERNELS_DIR)
    args = parser.parse_args(argv)
    try:
        print(ensure_kernels(args.kernels_dir))
    except KernelBuildError as e:
        print(f"building the engine's kernels failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
