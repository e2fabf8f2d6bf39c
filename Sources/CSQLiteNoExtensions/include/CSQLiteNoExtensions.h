/* Nothing to call: this target only replaces SQLite's extension initialisers in the daemon's
   link (NoExtensions.c). */
