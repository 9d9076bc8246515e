/* ml_outfile.h - every file memlens writes: created privately and
 * exclusively under a temporary name, renamed into place when complete.
 *
 * The rules (docs/security.md):
 *   - the data goes to PATH.tmp.XXXXXX in the target's directory, created
 *     with O_EXCL (mkostemp: a name nobody can guess or pre-create), mode
 *     0600, or 0640 with ML_OUTFILE_GROUP (the umask can only narrow it);
 *   - a symbolic link at PATH is never followed nor replaced;
 *   - an existing regular file at PATH is replaced only when memlens made
 *     it (a trace, a JSON report, an HTML page, folded stacks:
 *     ml_outfile_is_ours) or with ML_OUTFILE_FORCE; an empty file is not
 *     ours (another user may have pre-created it);
 *   - ML_OUTFILE_NEW: PATH must not exist at all (default trace names);
 *   - a character device or a FIFO at PATH (/dev/null, a pipe) is written in
 *     place, opened without O_CREAT and without following links;
 *   - a name of one of memlens' own open descriptors (/dev/stdout,
 *     /dev/stderr, /dev/fd/N, /proc/self/fd/N: the shell's redirections and
 *     process substitutions) is written in place through a copy of that
 *     descriptor; no link is followed, the kernel's or any other;
 *   - ml_outfile_commit re-checks PATH, then renames (RENAME_NOREPLACE when
 *     PATH was absent, so a file created meanwhile is never replaced);
 *     before that it fsyncs the data, except with ML_OUTFILE_NOSYNC (reports:
 *     the trace makes them again, and the rename alone already shows
 *     readers the old file or the whole new one).
 *
 * Errors: 0 or a negative errno, with a message naming the path and the
 * reason in err: -ELOOP for a link, -EEXIST for a file that is not ours
 * (or any file with ML_OUTFILE_NEW), -EISDIR, and what open/rename said.
 */
#ifndef ML_OUTFILE_H
#define ML_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>

#define ML_OUTFILE_FORCE 1u /* replace any regular file (--force) */
#define ML_OUTFILE_GROUP 2u /* mode 0640 instead of 0600 (--group-readable) */
#define ML_OUTFILE_NEW 4u   /* the name must be free: never replace anything */
#define ML_OUTFILE_KEEP 8u  /* a failed commit keeps the temporary file (a trace: data) */
#define ML_OUTFILE_NOSYNC 16u /* a file made from a trace (a report): no fsync before the rename */

typedef struct {
    int fd;         /* write here; -1 once committed or aborted */
    unsigned flags; /* ML_OUTFILE_* */
    char *path;     /* the destination */
    char *tmp;      /* the temporary file; NULL when writing in place */
} ml_outfile_t;

/** Unlinks the temporary files of the ML_OUTFILE_NOSYNC outputs (reports)
 * being written; async-signal-safe, for a handler of a fatal signal. */
void ml_outfile_unlink_live(void);

/** The descriptor PATH names when it is /dev/stdout (1), /dev/stderr (2),
 * /dev/fd/N or /proc/self/fd/N (N); -1 for any other path. */
int ml_outfile_own_fd(const char *path);

/** Says that descriptor fd (0, 1 or 2) was closed when memlens started and
 * is only held by /dev/null (cli/main.c): a path naming it is refused as a
 * closed descriptor, never written into /dev/null. */
void ml_outfile_held_closed(int fd);

/** Whether PATH may be written with these flags, without creating
 * anything. Returns 0 or a negative errno with a message in err. */
int ml_outfile_check(const char *path, unsigned flags, char *err, size_t errlen);

/** Checks PATH and creates the temporary file (or opens the device/FIFO).
 * On failure *o holds nothing (fd -1). */
int ml_outfile_open(ml_outfile_t *o, const char *path, unsigned flags, char *err, size_t errlen);

/** Syncs and closes the file, re-checks PATH and renames the temporary file
 * over it. On failure the temporary file is removed, or kept with
 * ML_OUTFILE_KEEP (the message then says where the data is). Always frees
 * what *o holds. */
int ml_outfile_commit(ml_outfile_t *o, char *err, size_t errlen);

/** Gives up: closes and removes the temporary file. No-op on a zeroed or
 * already finished *o. */
void ml_outfile_abort(ml_outfile_t *o);

/** True when the open file `fd` (read from offset 0) is one memlens made:
 * a trace ("MLTRACE"), a JSON report or diff ({"schema_version" with a
 * "generator": "memlens ..."), an HTML report (<title>memlens), a
 * speedscope file ("exporter": "memlens ..."), a pprof profile (gzip whose
 * header comment is ML_PPROF_GZIP_COMMENT), or folded stacks (every
 * complete line "FRAMES COUNT"). Empty files are not. */
bool ml_outfile_is_ours(int fd);

/** The temporary file of a PATH not written yet: PATH.tmp.XXXXXX in PATH's
 * directory, the most recently modified when there are several (a
 * recording still running, or one that was killed before its rename).
 * Returns true and its name in out; false when there is none, or when PATH
 * exists. For the messages about a trace that is not there. */
bool ml_outfile_pending(const char *path, char *out, size_t len);

/** The comment in the gzip header of memlens' pprof profiles. */
#define ML_PPROF_GZIP_COMMENT "memlens pprof profile"


#endif
