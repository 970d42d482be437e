/* GPU binding: which CUDA device this rank drives, decided once at start-up
 * from the configured train.device, the devices this rank can see and its
 * rank on the node.  The decision lands in rt->device (-1 = CPU) so the
 * identity line and the backend choice (nccl needs a device) read one
 * place.  This release computes on the CPU only; binding a visible GPU
 * still happens so the log shows what a CUDA run would use, and the train
 * layer decides whether it may use it. */
#ifndef ST_DEVICE_H
#define ST_DEVICE_H

#include "runtime.h"

/* requested is an enum st_device.  cpu: rt->device = -1.  auto: the GPU
 * local_rank % count when a CUDA device is visible (device 0 when
 * CUDA_VISIBLE_DEVICES names exactly one, as a launcher binding one GPU per
 * task does), else the CPU.  cuda: the same, but no device or a build
 * without CUDA is an error.  More ranks on the node than devices is an
 * error unless allow_shared.  Returns an exit status (ST_EXIT_USAGE for a
 * request this machine cannot meet); local to the rank: callers that go on
 * to collectives must agree on the result first. */
int st_device_bind(st_runtime *rt, int requested, int allow_shared);

#endif
