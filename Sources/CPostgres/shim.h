#ifndef RECEIPTD_CPOSTGRES_SHIM_H
#define RECEIPTD_CPOSTGRES_SHIM_H

#include <libpq-fe.h>

// Character-literal macros do not import into Swift as the int libpq expects.
static const int receiptd_pg_diag_sqlstate = PG_DIAG_SQLSTATE;
static const int receiptd_pg_diag_message_primary = PG_DIAG_MESSAGE_PRIMARY;

#endif
