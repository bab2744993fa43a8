#!/usr/bin/env python3
"""The CUDA versions and devices that tests/gpu/run.sh reports first, through ctypes (no
build, no package): the driver's CUDA version (libcuda), the toolkit's runtime and NVRTC
(the libraries Hone links, from CUDA_HOME, default /usr/local/cuda), what the runtime says
of the devices, and the architectures NVRTC can target.

  versions.py            prints one "name: value" line each; exit 0 when the runtime sees a
                         usable device, 3 when it sees none (no driver, a driver older than
                         the runtime, no device), 2 when the toolkit's libraries are missing
"""
import ctypes
import glob
import os
import sys

CUDA = os.environ.get("CUDA_HOME") or "/usr/local/cuda"


def ver(v):
    return f"{v // 1000}.{v % 1000 // 10}"


def load(names):
    for n in names:
        try:
            return ctypes.CDLL(n), n
        except OSError:
            continue
    return None, None


def toolkit_lib(stem):
    pats = [f"{CUDA}/lib64/{stem}.so*", f"{CUDA}/targets/x86_64-linux/lib/{stem}.so*"]
    found = sorted(p for pat in pats for p in glob.glob(pat))
    return found + [stem + ".so"]


def main():
    rc = 0
    drv, drv_name = load(["libcuda.so.1", "libcuda.so"])
    if drv is None:
        print("driver: none (libcuda.so.1 not found: no NVIDIA driver here)")
    else:
        v = ctypes.c_int(0)
        drv.cuDriverGetVersion(ctypes.byref(v))
        print(f"driver: CUDA {ver(v.value)} ({drv_name})")
    rt, rt_name = load(toolkit_lib("libcudart"))
    nv, nv_name = load(toolkit_lib("libnvrtc"))
    if rt is None or nv is None:
        print(f"runtime/nvrtc: not found under {CUDA} (set CUDA_HOME)")
        return 2
    v = ctypes.c_int(0)
    rt.cudaRuntimeGetVersion(ctypes.byref(v))
    print(f"runtime: CUDA {ver(v.value)} ({rt_name})")
    rt_ver = v.value
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    nv.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    n = ctypes.c_int(0)
    nv.nvrtcGetNumSupportedArchs(ctypes.byref(n))
    archs = (ctypes.c_int * max(n.value, 1))()
    nv.nvrtcGetSupportedArchs(archs)
    print(f"nvrtc: {major.value}.{minor.value} ({nv_name}), targets sm_" +
          ",".join(str(archs[i]) for i in range(n.value)))
    dv = ctypes.c_int(0)
    rt.cudaDriverGetVersion(ctypes.byref(dv))
    if dv.value and dv.value < rt_ver:
        print(f"WARNING: the driver supports CUDA {ver(dv.value)}, older than the runtime's {ver(rt_ver)}")
    count = ctypes.c_int(0)
    e = rt.cudaGetDeviceCount(ctypes.byref(count))
    if e != 0:
        rt.cudaGetErrorString.restype = ctypes.c_char_p
        print(f"devices: none (cudaGetDeviceCount: error {e}, {rt.cudaGetErrorString(e).decode()})")
        return 3
    print(f"devices: {count.value}")
    if count.value == 0:
        return 3
    if drv is not None and drv.cuInit(0) == 0:
        for i in range(count.value):
            d = ctypes.c_int(0)
            drv.cuDeviceGet(ctypes.byref(d), i)
            name = ctypes.create_string_buffer(256)
            drv.cuDeviceGetName(name, 256, d)
            ma, mi, sms, mem = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0), ctypes.c_size_t(0)
            drv.cuDeviceGetAttribute(ctypes.byref(ma), 75, d)  # compute capability major
            drv.cuDeviceGetAttribute(ctypes.byref(mi), 76, d)  # minor
            drv.cuDeviceGetAttribute(ctypes.byref(sms), 16, d)  # multiprocessors
            drv.cuDeviceTotalMem_v2(ctypes.byref(mem), d)
            sm = ma.value * 10 + mi.value
            ok = any(archs[j] == sm for j in range(n.value))
            print(f"device {i}: {name.value.decode()}, sm_{sm}, {sms.value} SMs, {mem.value / 2**30:.1f} GiB"
                  + ("" if ok else f" -- NVRTC cannot target sm_{sm}"))
            if not ok:
                rc = 3
    return rc


if __name__ == "__main__":
    sys.exit(main())
