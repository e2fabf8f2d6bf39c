#ifndef LOCATIOND_CSQLITE_SHIM_H
#define LOCATIOND_CSQLITE_SHIM_H
// SQLite 3. Debian: libsqlite3-dev. SQLITE_TRANSIENT is a cast macro Swift cannot import.
#include <sqlite3.h>

static inline int locationd_sqlite3_bind_text(sqlite3_stmt *s, int i, const char *text) {
    return sqlite3_bind_text(s, i, text, -1, SQLITE_TRANSIENT);
}

static inline int locationd_sqlite3_bind_blob(sqlite3_stmt *s, int i, const void *bytes, int n) {
    return sqlite3_bind_blob(s, i, bytes, n, SQLITE_TRANSIENT);
}
#endif
