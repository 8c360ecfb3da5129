# The OpenSSH client config reader: specs, Host patterns, Include, Match, tokens, errors.
lc_unit_test(test_sshconfig unit/test_sshconfig.c)
