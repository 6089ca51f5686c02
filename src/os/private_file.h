/* private_file.h — files and folders that stoke makes in places other users
** may reach (the --cache folder and its shards, the quarantine file, the
** resume state, shared-memory segments): made private, published whole,
** and refused when someone else could have touched them.
**
** The rule, as ssh's StrictModes:
**  - made with 0700 folders and 0600 files (STOKE__PRIVATE_DIR_MODE,
**    STOKE__PRIVATE_FILE_MODE), unless the caller asks for other modes;
**  - a file is written under a temporary name opened with
**    O_CREAT|O_EXCL|O_NOFOLLOW (so a planted file or link is never written
**    through) and renamed into place once complete;
**  - before use, a file or folder is refused, with an error naming its path,
**    owner and mode, when it is not owned by the effective user, or when
**    group or others may write it (beyond what the caller's mode allows).
**
** Checks are made on the opened descriptor (fstat), not on the path, so
** what is checked is what is read.  A file inside a checked folder needs
** no more care: nobody else may rename or replace entries there.
**
** Every call goes through the table of system calls (os/syscalls.h), so
** tests can fail them; the mode asked for is also what the check allows:
** a caller that makes group-writable files (mode 0660) accepts them. */
#ifndef STOKE_OS_PRIVATE_FILE_H
#define STOKE_OS_PRIVATE_FILE_H

#include "os/syscalls.h"

#define STOKE__PRIVATE_DIR_MODE 0700u
#define STOKE__PRIVATE_FILE_MODE 0600u

/* Refuse what st describes (the object at `path`, for the message) unless
** it is owned by the effective user, is a folder (want_dir) or a regular
** file, and group and others may write it only as far as `mode` allows.
** 0, or STOKE_EINVAL with "PATH: owned by uid U (you are V)" / "PATH: mode
** 0777 lets group or others write it" in err. */
int stoke__check_private(const struct stat *st, const char *path,
                         bool want_dir, unsigned mode, char *err, size_t cap);

/* Open the folder at path (O_NOFOLLOW) and check it; 0, STOKE_EIO (errno
** kept: ENOENT when absent) or the refusal. */
int stoke__check_private_dir(const stoke__sys *s, const char *path,
                             unsigned mode, char *err, size_t cap);

/* mkdir -p path; folders it makes get `mode`, and the last folder of path,
** made or found, must pass the check.  0, STOKE_EIO or the refusal. */
int stoke__private_mkdirs(const stoke__sys *s, const char *path,
                          unsigned mode, char *err, size_t cap);

/* Open an existing file for reading (O_NOFOLLOW) and check it: *fd, or
** STOKE_EIO (errno kept: ENOENT when absent, ELOOP for a link) or the
** refusal, with *fd = -1. */
int stoke__secure_open_read(const stoke__sys *s, const char *path,
                            unsigned mode, int *fd, char *err, size_t cap);

/* Create a fresh temporary file beside path ("PATH.tmp-PID-RANDOM", written
** into tmp) with O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW and `mode`; *fd, or
** STOKE_EIO / STOKE_EINVAL (path too long). */
int stoke__secure_create(const stoke__sys *s, const char *path,
                         unsigned mode, char *tmp, size_t tmp_cap, int *fd,
                         char *err, size_t cap);

/* Rename tmp (from stoke__secure_create, closed) to path; on failure tmp is
** removed.  0 or STOKE_EIO. */
int stoke__secure_publish(const stoke__sys *s, const char *tmp,
                          const char *path, char *err, size_t cap);

#endif /* STOKE_OS_PRIVATE_FILE_H */
