// ip_gpu_type.cu -- the GPU interpreter's kernels for one element type,
// IP_GPU_TYPE (an ID of ip_dtype.def: F32, BF16, ...): the interpreter
// kernel for each reduction operator and AVG's division, in the table
// ip_gpu.cu launches from.  The build compiles this file once per type,
// each with -DIP_GPU_TYPE=ID, so that the forty kernels build in
// parallel.
#include "ip_gpu_kernel.cuh"

#ifndef IP_GPU_TYPE
#error "build with -DIP_GPU_TYPE=<an ID of ip_dtype.def>"
#endif

#define IP_GPU_CAT2(a, b) a##b
#define IP_GPU_CAT(a, b) IP_GPU_CAT2(a, b)
#define DT IP_GPU_CAT(IP_, IP_GPU_TYPE)

extern "C" const void *const IP_GPU_CAT(ip_gpu_kernels_, IP_GPU_TYPE)[IP_GPU_TYPE_KERNELS] = {
    (const void *)ip_gpu_kernel<DT, IP_OP_SUM>, (const void *)ip_gpu_kernel<DT, IP_OP_PROD>,
    (const void *)ip_gpu_kernel<DT, IP_OP_MAX>, (const void *)ip_gpu_kernel<DT, IP_OP_MIN>,
    (const void *)ip_divide_kernel<DT>};
