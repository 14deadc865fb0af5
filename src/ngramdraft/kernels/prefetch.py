"""A software prefetch for numba kernels (LLVM's llvm.prefetch), a no-op without the JIT.

Drafting looks up several n-grams in tables larger than the caches; each
lookup is a chain of dependent loads. Prefetching every first probe at once
lets those cache misses overlap instead of queueing.
"""

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def _prefetch(typingctx, arr, index):
    """Prefetch the cache line of element ``index`` of a C-contiguous array, flat."""
    sig = types.void(arr, index)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i8p = ir.PointerType(ir.IntType(8))
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
        # read, high temporal locality, data cache
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


def _no_prefetch(arr, index):
    return None


prefetch = _no_prefetch if numba.config.DISABLE_JIT else _prefetch
