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

// sqlite3_config is variadic, which Swift cannot call. Before the first connection: no
// page-cache bulk. Debian's SQLite (SQLITE_DEFAULT_PCACHE_INITSZ=20) allocates 20 pages per
// connection at its first read, ≈ 86 KiB, and writes every page's header at once, so all of it
// is resident for a store written a few times an hour; pages are allocated as they are read
// instead. (Its lookaside, the other memory set aside per connection, is compiled out:
// SQLITE_OMIT_LOOKASIDE.) SQLITE_MISUSE once SQLite is initialised.
static inline int locationd_sqlite3_config_lean(void) {
    return sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0);
}
#endif
