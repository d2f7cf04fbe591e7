/*
 * The gradient of an embedding by rows (library orion_train, runtime/train/
 * rows.c): the backward hands out the adjoint of a gather of a param's rows,
 * one row per index it was fed, and the training loop adds each row into the
 * param's gradient at its index (a scatter-add, which the ANE does not have).
 * docs/training.md ("The gradient of an embedding") has the measurement.
 */
#ifndef ORION_TRAIN_ROWS_H
#define ORION_TRAIN_ROWS_H

#include <stdint.h>

/* grad[ids[j], :] += rows[j, :] for j < n, over a table of table_rows rows of
 * width floats. Every id is checked first: returns -1 when all lie in
 * [0, table_rows) (and adds), else the first position j whose id does not
 * (and changes nothing). */
int64_t train_rows_add(float *grad, int64_t table_rows, int64_t width, const int32_t *ids, int64_t n,
                       const float *rows);

#endif
