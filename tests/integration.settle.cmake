# After a host loss the lost connection's processes end as soon as the host answers again (the
# runtime's sweep by lifeline id), a plain fish user's, and another connection's are kept.
lc_integration_test(test_settle 300 integration/test_settle.c)
