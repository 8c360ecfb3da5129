# The TLS material of clusters (security.h: lc_tls_ca_*, lc_tls_cert_*), verified with OpenSSL
# itself and with the openssl command where it exists.
lc_unit_test(test_tls unit/test_tls.c)
