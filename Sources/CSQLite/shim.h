#ifndef RECEIPTD_CSQLITE_SHIM_H
#define RECEIPTD_CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT casts -1 to a function pointer, which does not import into Swift.
static inline sqlite3_destructor_type receiptd_sqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif
