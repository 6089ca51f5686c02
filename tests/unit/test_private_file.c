/* test_private_file.c — private files and folders (os/private_file.h):
** folders made 0700 and files 0600 whatever the umask allows; a folder or
** file owned by another user, or writable by group or others, refused with
** its path, owner and mode in the message (the mode asked for widens what
** is accepted); a link in the way refused, never followed; a temporary
** file published only by its rename.  The second user's attacks are in
** tests/cli/t1101-shared-places.sh (run as root). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/private_file.h"

static char g_dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/stoke-private-XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static unsigned mode_of(const char *path) {
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  return (unsigned)st.st_mode & 07777;
}

static void test_mkdirs_private(void **state) {
  (void)state;
  char p[512], err[STOKE__ERRMSG_CAP];
  snprintf(p, sizeof p, "%s/a/b/c", g_dir);
  mode_t old = umask(0); /* the modes come from stoke, not the umask */
  assert_int_equal(stoke__private_mkdirs(NULL, p, STOKE__PRIVATE_DIR_MODE,
                                         err, sizeof err), 0);
  umask(old);
  assert_int_equal(mode_of(p), 0700);
  snprintf(p, sizeof p, "%s/a", g_dir);
  assert_int_equal(mode_of(p), 0700);
  /* Found again: accepted. */
  snprintf(p, sizeof p, "%s/a/b/c", g_dir);
  assert_int_equal(stoke__private_mkdirs(NULL, p, STOKE__PRIVATE_DIR_MODE,
                                         err, sizeof err), 0);
}

static void test_open_folder_refused(void **state) {
  (void)state;
  char p[512], err[STOKE__ERRMSG_CAP];
  snprintf(p, sizeof p, "%s/open", g_dir);
  assert_int_equal(mkdir(p, 0700), 0);
  assert_int_equal(chmod(p, 0777), 0);
  assert_int_equal(stoke__private_mkdirs(NULL, p, STOKE__PRIVATE_DIR_MODE,
                                         err, sizeof err), STOKE_EINVAL);
  assert_non_null(strstr(err, p));
  assert_non_null(strstr(err, "0777"));
  assert_non_null(strstr(err, "group or others"));
  /* The sticky bit does not help: others may still add entries. */
  assert_int_equal(chmod(p, 01733), 0);
  assert_int_equal(stoke__check_private_dir(NULL, p, STOKE__PRIVATE_DIR_MODE,
                                            err, sizeof err), STOKE_EINVAL);
  /* Read by others is no attack on the contents' integrity: accepted. */
  assert_int_equal(chmod(p, 0755), 0);
  assert_int_equal(stoke__check_private_dir(NULL, p, STOKE__PRIVATE_DIR_MODE,
                                            err, sizeof err), 0);
  /* Asked for a group-writable folder: it is what was asked. */
  assert_int_equal(chmod(p, 0770), 0);
  assert_int_equal(stoke__check_private_dir(NULL, p, 0770, err, sizeof err),
                   0);
  assert_int_equal(stoke__check_private_dir(NULL, p, 0700, err, sizeof err),
                   STOKE_EINVAL);
}

static void test_other_owner_refused(void **state) {
  (void)state;
  char err[STOKE__ERRMSG_CAP];
  struct stat st;
  memset(&st, 0, sizeof st);
  st.st_mode = S_IFREG | 0600;
  st.st_uid = geteuid() + 1;
  assert_int_equal(stoke__check_private(&st, "/x/y", false, 0600, err,
                                        sizeof err), STOKE_EINVAL);
  char want[64];
  snprintf(want, sizeof want, "owned by uid %ld", (long)geteuid() + 1);
  assert_non_null(strstr(err, want));
  assert_non_null(strstr(err, "/x/y"));
  assert_non_null(strstr(err, "0600"));
  st.st_uid = geteuid();
  assert_int_equal(stoke__check_private(&st, "/x/y", false, 0600, err,
                                        sizeof err), 0);
  /* A folder where a file is expected, and the reverse. */
  assert_int_equal(stoke__check_private(&st, "/x/y", true, 0700, err,
                                        sizeof err), STOKE_EINVAL);
  st.st_mode = S_IFDIR | 0700;
  assert_int_equal(stoke__check_private(&st, "/x/y", false, 0600, err,
                                        sizeof err), STOKE_EINVAL);
}

static void test_create_publish_read(void **state) {
  (void)state;
  char p[512], tmp[600], err[STOKE__ERRMSG_CAP];
  snprintf(p, sizeof p, "%s/file", g_dir);
  int fd;
  mode_t old = umask(0);
  assert_int_equal(stoke__secure_create(NULL, p, STOKE__PRIVATE_FILE_MODE,
                                        tmp, sizeof tmp, &fd, err,
                                        sizeof err), 0);
  umask(old);
  assert_int_equal(write(fd, "hi", 2), 2);
  assert_int_equal(close(fd), 0);
  assert_int_equal(access(p, F_OK), -1); /* not there before the rename */
  assert_int_equal(stoke__secure_publish(NULL, tmp, p, err, sizeof err), 0);
  assert_int_equal(mode_of(p), 0600);
  assert_int_equal(access(tmp, F_OK), -1);
  assert_int_equal(stoke__secure_open_read(NULL, p, STOKE__PRIVATE_FILE_MODE,
                                           &fd, err, sizeof err), 0);
  close(fd);
  /* Writable by others: refused, the descriptor closed. */
  assert_int_equal(chmod(p, 0666), 0);
  assert_int_equal(stoke__secure_open_read(NULL, p, STOKE__PRIVATE_FILE_MODE,
                                           &fd, err, sizeof err),
                   STOKE_EINVAL);
  assert_int_equal(fd, -1);
  assert_non_null(strstr(err, "0666"));
  /* Absent: EIO with ENOENT kept, so callers may treat it as empty. */
  snprintf(p, sizeof p, "%s/absent", g_dir);
  assert_int_equal(stoke__secure_open_read(NULL, p, STOKE__PRIVATE_FILE_MODE,
                                           &fd, err, sizeof err), STOKE_EIO);
  assert_int_equal(errno, ENOENT);
}

static void test_links_refused(void **state) {
  (void)state;
  char target[512], link[512], err[STOKE__ERRMSG_CAP];
  snprintf(target, sizeof target, "%s/target", g_dir);
  snprintf(link, sizeof link, "%s/link", g_dir);
  FILE *f = fopen(target, "w");
  assert_non_null(f);
  fclose(f);
  chmod(target, 0600);
  assert_int_equal(symlink(target, link), 0);
  int fd;
  assert_int_equal(stoke__secure_open_read(NULL, link, 0600, &fd, err,
                                           sizeof err), STOKE_EIO);
  assert_int_equal(errno, ELOOP);
  /* A link as the folder: refused too. */
  char dlink[512];
  snprintf(dlink, sizeof dlink, "%s/dlink", g_dir);
  assert_int_equal(symlink(g_dir, dlink), 0);
  assert_int_not_equal(stoke__check_private_dir(NULL, dlink, 0700, err,
                                                sizeof err), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_mkdirs_private, setup, teardown),
      cmocka_unit_test_setup_teardown(test_open_folder_refused, setup,
                                      teardown),
      cmocka_unit_test(test_other_owner_refused),
      cmocka_unit_test_setup_teardown(test_create_publish_read, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_links_refused, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
