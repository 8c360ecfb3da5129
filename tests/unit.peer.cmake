# The peer lookup of our listeners on this machine (src/peer.c): NETLINK_SOCK_DIAG on loopback
# connections. As root (CI) it also checks a connection of uid 65534.
lc_unit_test(test_peer unit/test_peer.c)
