/* The extensions that SQLite's sqlite3_open registers in every connection of Debian's build
   (FTS3/4 with its tokenizers, FTS5, R*Tree and Geopoly, the dbstat and sqlite_stmt tables),
   replaced in the daemon by initialisers that register nothing. The store uses none of them, and
   registering them at every open ran code from each (FTS5's alone is 156 KiB), which then stayed
   resident in 64 KiB blocks: 0.2–0.3 MiB of the idle daemon (docs/benchmarks.md, "Footprint").

   How it works: the daemon links SQLite from Debian's static archive, which has one object per
   source file (Package.swift, scripts/link). main.o's list of built-in extensions refers to these
   five functions by name; the linker resolves them here, before it reads the archive, so the
   extensions' objects are never taken from it. The daemon's SQLite therefore has no such tables
   or functions (a database that uses them is not locationd's). Tests, tools and locationctl link
   the shared library, unchanged. If a later SQLite build keeps these functions private (one
   object, as the amalgamation is), these definitions are simply unused. */
struct sqlite3;

#define SQLITE_OK 0

int sqlite3Fts3Init(struct sqlite3 *db) { (void)db; return SQLITE_OK; }
int sqlite3Fts5Init(struct sqlite3 *db) { (void)db; return SQLITE_OK; }
int sqlite3RtreeInit(struct sqlite3 *db) { (void)db; return SQLITE_OK; }
int sqlite3DbstatRegister(struct sqlite3 *db) { (void)db; return SQLITE_OK; }
int sqlite3StmtVtabInit(struct sqlite3 *db) { (void)db; return SQLITE_OK; }
