"""cuda_library: compiles .cu files with nvcc and wraps the objects in a cc_library.

Each .cu file is compiled once into one object holding machine code for every
target architecture (sm_80, sm_90, sm_100) plus compute_100 PTX, so that tests
and benchmarks share the compiled device code instead of recompiling it.
`--define=cuda_arch=90` (see tools/build_gpu.sh) narrows the build to one
architecture for quick GPU iterations. Objects are compiled without relocatable
device code: device functions shared between files live in headers.
"""

load("@local_cuda//:defs.bzl", "NVCC")

_DEFAULT_ARCHS = ["80", "90", "100"]

def _gencode_flags(ctx):
    archs = ctx.var.get("cuda_arch", "")
    archs = archs.split(",") if archs else _DEFAULT_ARCHS
    flags = []
    for a in archs:
        flags.append("-gencode=arch=compute_%s,code=sm_%s" % (a, a))
    last = archs[-1]
    flags.append("-gencode=arch=compute_%s,code=compute_%s" % (last, last))
    return flags

def _cuda_objects_impl(ctx):
    cc_infos = [d[CcInfo] for d in ctx.attr.deps if CcInfo in d]
    comp = cc_common.merge_cc_infos(cc_infos = cc_infos).compilation_context
    inc = []
    for d in comp.includes.to_list():
        inc += ["-I", d]
    for d in comp.quote_includes.to_list():
        inc += ["-I", d]
    for d in comp.system_includes.to_list():
        inc += ["-isystem", d]
    defines = ["-D" + d for d in comp.defines.to_list()]
    hdrs = depset(ctx.files.hdrs, transitive = [comp.headers])
    outs = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.o" % (ctx.label.name, src.basename[:-len(src.extension) - 1]))
        args = ctx.actions.args()
        args.add_all(["-c", "-std=c++17", "-O3", "-lineinfo", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-Xcompiler", "-Wall", "-Werror", "all-warnings"])
        args.add_all(_gencode_flags(ctx))
        args.add_all(["-I", "."])
        args.add_all(["-I", ctx.bin_dir.path])
        args.add_all(inc)
        args.add_all(defines)
        args.add_all(ctx.attr.copts)
        args.add_all(["-o", obj.path, src.path])
        ctx.actions.run(
            executable = NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [hdrs]),
            outputs = [obj],
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
            use_default_shell_env = True,
        )
        outs.append(obj)
    return [DefaultInfo(files = depset(outs))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], alwayslink = False, visibility = None, testonly = False):
    """A cc_library whose .cu sources are compiled by nvcc; links the static CUDA runtime."""
    _cuda_objects(
        name = name + "_cuda_objs",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cuda_headers"],
        copts = copts,
        testonly = testonly,
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_cuda_objs"],
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart_static"],
        alwayslink = alwayslink,
        linkstatic = True,
        visibility = visibility,
        testonly = testonly,
        # nvcc-compiled objects reference libstdc++ (exception tables, new/delete).
        linkopts = ["-lstdc++"],
    )

def cuda_test(name, srcs, deps = [], tags = [], **kwargs):
    """A cc_test whose sources are .cu files. Tagged `gpu`: it needs a GPU to
    do its work and reports itself skipped (exit 0) without one."""
    cuda_library(
        name = name + "_lib",
        srcs = srcs,
        deps = deps,
        alwayslink = True,
        testonly = True,
    )
    native.cc_test(
        name = name,
        deps = [":" + name + "_lib"],
        linkstatic = True,
        tags = tags + ["gpu"],
        size = kwargs.pop("size", "medium"),
        **kwargs
    )

def cuda_binary(name, srcs, deps = [], **kwargs):
    """A cc_binary whose sources are .cu files."""
    cuda_library(
        name = name + "_lib",
        srcs = srcs,
        deps = deps,
        alwayslink = True,
    )
    native.cc_binary(
        name = name,
        deps = [":" + name + "_lib"],
        linkstatic = True,
        **kwargs
    )
