/* report_cmd.c - placeholder replaced by report/ (issue 3). */
#include "ml_cli.h"
#include <stdio.h>

int ml_cmd_report(int argc, char **argv) {
    (void)argc;
    (void)argv;
    ml_die_msg("report is not built yet");
    return ML_EXIT_ERROR;
}
