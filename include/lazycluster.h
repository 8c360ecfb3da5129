/*
 * lazycluster.h - the whole public API of liblazycluster.
 *
 * Threads: see each module's header. In short, every public call may be made from any thread
 * except the engine's own (that is, not from inside a callback); callbacks run on the engine
 * thread and must not block or call back into blocking lazycluster functions.
 */
#ifndef LAZYCLUSTER_H
#define LAZYCLUSTER_H

#include "lazycluster/common.h"
#include "lazycluster/engine.h"
#include "lazycluster/runtime.h"
#include "lazycluster/forward.h"
#include "lazycluster/group.h"
#include "lazycluster/manager.h"
#include "lazycluster/cluster.h"
#include "lazycluster/control.h"
#include "lazycluster/hostinfo.h"
#include "lazycluster/inventory.h"
#include "lazycluster/ports.h"
#include "lazycluster/security.h"
#include "lazycluster/jobs.h"

#endif /* LAZYCLUSTER_H */
