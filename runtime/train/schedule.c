/*
 * The learning-rate schedule (include/orion/train_optim.h): a linear warmup
 * from 0, then constant or a cosine decay to min_lr. Computed in closed form
 * from the step number, so a resumed run gets exactly the rates of an
 * uninterrupted one (no state to save).
 */
#include "orion/train_optim.h"

#include <math.h>

/* math.h has M_PI only outside strict C11; the double nearest pi, as Python's math.pi. */
static const double pi = 3.14159265358979323846;

double train_schedule_lr(const TrainSchedule *sch, uint64_t step) {
  /* Warmup: step s of K gets lr * s / K, so step 1 already learns (lr / K)
   * and step K runs at the full rate. */
  if (sch->warmup > 0 && step <= sch->warmup) return sch->lr * (double)step / (double)sch->warmup;
  if (sch->kind == TRAIN_SCHEDULE_CONSTANT) return sch->lr;
  /* Cosine over the steps after the warmup, PyTorch's CosineAnnealingLR
   * with T_max = N - K in closed form: step K + t gets
   * min + (lr - min) * (1 + cos(pi * t / (N - K))) / 2, reaching min_lr at
   * step N and staying there after it. */
  if (sch->steps <= sch->warmup || step >= sch->steps) return sch->min_lr;
  double t = (double)(step - sch->warmup), span = (double)(sch->steps - sch->warmup);
  return sch->min_lr + (sch->lr - sch->min_lr) * 0.5 * (1.0 + cos(pi * t / span));
}
