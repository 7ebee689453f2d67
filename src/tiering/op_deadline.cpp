#include "tiering/op_deadline.h"

namespace halo::tiering {

namespace {
thread_local const SteadyTime* tlDeadline = nullptr;
}  // namespace

const SteadyTime* currentOpDeadline() {
    return tlDeadline;
}

DeadlineExecutor::Scope::Scope(const SteadyTime* d) : prev(tlDeadline) {
    tlDeadline = d;
}

DeadlineExecutor::Scope::~Scope() {
    tlDeadline = prev;
}

}  // namespace halo::tiering
