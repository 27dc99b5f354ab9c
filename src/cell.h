/*
 * cell.h - cells (cell.c) and arrays (array.c): the one thing the engine
 * must do for them (register their drop hooks).
 */
#ifndef HIVE_CELL_H
#define HIVE_CELL_H

struct hive;

/* At hive_init, once the store is open: register the cells' drop hook. */
void hive__cells_init(struct hive *h);

/* The same for arrays (array.c): their header block goes with the record. */
void hive__arrays_init(struct hive *h);

#endif
