# Placement (lc__place, a pure function): spread and pack, caps, mixed GPU and CPU hosts, the
# master's host excluded, more workers than slots, a type's place hook and every refusal's message.
lc_unit_test(test_placement unit/test_placement.c)
