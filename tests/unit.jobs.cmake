# The job queue's pure parts (src/jobs/command.c, joblog.c; src/template.c under them): a job's
# command and its placeholders (quoting run through /bin/sh), the append rule, a worker's command,
# a pool job's line, the `command` type's templates over the same scanner, and GNU parallel's
# joblog checked against GNU parallel itself (its lines, --resume and --resume-failed).
lc_unit_test(test_jobcmd unit/test_jobcmd.c)
