# The OpenSSH client config reader: specs, Host patterns, Include, Match, tokens, errors.
lc_unit_test(test_sshconfig unit/test_sshconfig.c)
# `lazyclusterctl config` against `ssh -G` over the corpus in tests/data/sshconfig.
add_test(NAME sshconfig_vs_ssh
  COMMAND sh ${PROJECT_SOURCE_DIR}/tests/sshconfig_vs_ssh.sh $<TARGET_FILE:lazyclusterctl>
          ${PROJECT_SOURCE_DIR}/tests/data/sshconfig)
set_tests_properties(sshconfig_vs_ssh PROPERTIES LABELS unit TIMEOUT 120)
