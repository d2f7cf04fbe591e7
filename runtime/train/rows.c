/*
 * The scatter-add of an embedding's gradient rows (include/orion/train_rows.h).
 */
#include "orion/train_rows.h"

int64_t train_rows_add(float *grad, int64_t table_rows, int64_t width, const int32_t *ids, int64_t n,
                       const float *rows) {
  for (int64_t j = 0; j < n; j++)
    if (ids[j] < 0 || ids[j] >= table_rows) return j;
  /* in position order: the sums are the one-hot product's, term for term */
  for (int64_t j = 0; j < n; j++) {
    float *g = grad + (int64_t)ids[j] * width;
    const float *r = rows + j * width;
    for (int64_t k = 0; k < width; k++) g[k] += r[k];
  }
  return -1;
}
