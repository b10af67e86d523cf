"""Repository rule exposing the locally installed CUDA toolkit as @local_cuda.

The toolkit is found from the CUDA_PATH environment variable, else the
toolkit's default prefix /usr/local/cuda. Only headers and the static CUDA
runtime are linked; the driver (libcuda) is reached at run time through
cudaGetDriverEntryPointByVersion, so purlin binaries start on machines
without a GPU or driver.
"""

_BUILD = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh", "include/**/*.inl", "include/cuda/**", "include/cub/**", "include/thrust/**", "include/nv/**"]),
    includes = ["include"],
)

cc_library(
    name = "cudart_static",
    srcs = ["lib/libcudart_static.a"],
    linkopts = ["-ldl", "-lpthread", "-lrt"],
    deps = [":cuda_headers"],
)
"""

def _find_cuda(rctx):
    candidates = []
    env = rctx.os.environ.get("CUDA_PATH", "")
    if env:
        candidates.append(env)
    candidates.append("/usr/local/cuda")
    for c in candidates:
        p = rctx.path(c)
        if p.get_child("bin").get_child("nvcc").exists:
            return p
    fail("purlin: no CUDA toolkit found (looked for bin/nvcc under %s). " % ", ".join(candidates) +
         "Install the CUDA toolkit (13.0 is what purlin is built with) or set CUDA_PATH.")

def _child(root, rel):
    d = root
    for part in rel.split("/"):
        d = d.get_child(part)
    return d

def _first_existing(rctx, root, subdirs, probe):
    for sub in subdirs:
        d = _child(root, sub)
        if d.get_child(probe).exists:
            return d
    fail("purlin: %s not found under %s (looked in %s)" % (probe, root, ", ".join(subdirs)))

def _cuda_configure_impl(rctx):
    root = _find_cuda(rctx)
    rctx.symlink(_first_existing(rctx, root, ["targets/x86_64-linux/include", "include"], "cuda_runtime_api.h"), "include")
    rctx.symlink(_first_existing(rctx, root, ["targets/x86_64-linux/lib", "lib64", "lib"], "libcudart_static.a"), "lib")
    rctx.file("BUILD", _BUILD)
    rctx.file("defs.bzl", 'NVCC = "%s"\n' % _child(root, "bin/nvcc"))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
