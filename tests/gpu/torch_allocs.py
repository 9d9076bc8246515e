"""torch_allocs.py MODE - PyTorch's GPU allocations, for tests/gpu/run.sh.

Run once per allocator mode (the allocator configuration is read once per
process), under `memlens run`:
  native      the default caching allocator (cudaMalloc segments)
  async       PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
  expandable  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (VMM)
The last line of stdout is JSON with PyTorch's own numbers, which
tests/gpu/check.py compares with the memlens report.
"""
import ctypes
import json
import sys

import torch

MB = 1 << 20
mode = sys.argv[1] if len(sys.argv) > 1 else "native"
out = {"mode": mode}
torch.cuda.init()
x = torch.empty(64 * MB, dtype=torch.uint8, device="cuda")  # a large-pool segment
y = torch.empty(100, device="cuda")  # a small-pool segment
torch.cuda.synchronize()
out["reserved_with_x_y"] = torch.cuda.memory_reserved()
out["allocated_with_x_y"] = torch.cuda.memory_allocated()
# What the script asked for, independent of the allocator's rounding.
out["asked_x_y"] = x.numel() * x.element_size() + y.numel() * y.element_size()
del x, y
torch.cuda.empty_cache()
h = torch.empty(8 * MB, dtype=torch.uint8, pin_memory=True)  # CachingHostAllocator: pinned host
out["pinned_bytes"] = h.numel()
del h
if hasattr(torch._C, "_host_emptyCache"):
    torch._C._host_emptyCache()
cuda = ctypes.CDLL("libcuda.so.1")  # managed memory straight from the driver
p = ctypes.c_uint64(0)
out["managed_rc"] = cuda.cuMemAllocManaged(ctypes.byref(p), ctypes.c_size_t(4 * MB), ctypes.c_uint(1))
cuda.cuMemFree_v2(p)
keep = torch.empty(16 * MB, dtype=torch.uint8, device="cuda")  # alive at exit
# One reference more than Python will ever drop: at interpreter exit the
# tensor is not destroyed, so no allocator mode frees it (with the async
# backend it otherwise goes back through cuMemFreeAsync during teardown).
ctypes.pythonapi.Py_IncRef(ctypes.py_object(keep))
out["asked_keep"] = keep.numel() * keep.element_size()
torch.cuda.synchronize()
stats = torch.cuda.memory_stats()
out["num_device_alloc"] = stats.get("num_device_alloc", 0)
out["num_device_free"] = stats.get("num_device_free", 0)
out["reserved_at_exit"] = torch.cuda.memory_reserved()
out["torch"] = torch.__version__
print(json.dumps(out))
