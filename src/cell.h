/*
 * cell.h - cells (cell.c): the one thing the engine must do for them.
 */
#ifndef HIVE_CELL_H
#define HIVE_CELL_H

struct hive;

/* At hive_init, once the store is open: register the cells' drop hook. */
void hive__cells_init(struct hive *h);

#endif
