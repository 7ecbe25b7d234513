// SPDX-License-Identifier: MIT OR Apache-2.0
// as_user UID CMD ARGS...: runs CMD as an unprivileged user (uid = gid = UID, no supplementary
// groups), so the VM test can check what spelunk says and does without root. Busybox's
// setpriv cannot change ids.
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: as_user UID CMD ARGS...\n");
        return 2;
    }
    unsigned id = (unsigned)strtoul(argv[1], NULL, 10);
    if (setgroups(0, NULL) != 0 || setgid(id) != 0 || setuid(id) != 0) {
        perror("as_user: dropping privileges");
        return 2;
    }
    execv(argv[2], argv + 2);
    perror("as_user: exec");
    return 127;
}
