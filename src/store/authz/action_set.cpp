#include "store/authz/action_set.h"

#include <algorithm>
#include <array>

namespace halo::store::authz {

namespace {

constexpr std::array<std::string_view, kNumActionTypes> kNames = {
#define HALO_AUTHZ_NAME(name) #name,
    HALO_AUTHZ_ACTIONS(HALO_AUTHZ_NAME)
#undef HALO_AUTHZ_NAME
};

static_assert(std::is_sorted(kNames.begin(), kNames.end()),
              "HALO_AUTHZ_ACTIONS must list the names in ASCII order");

}  // namespace

std::string_view actionName(ActionType a) {
    return kNames[static_cast<size_t>(a)];
}

std::optional<ActionType> parseAction(std::string_view name) {
    auto it = std::lower_bound(kNames.begin(), kNames.end(), name);
    if (it == kNames.end() || *it != name) return std::nullopt;
    return static_cast<ActionType>(it - kNames.begin());
}

void ActionSet::add(ActionType a) {
    if (a == ActionType::anyAction) {
        bits_.set();
        return;
    }
    bits_.set(static_cast<size_t>(a));
}

void ActionSet::addAll(const ActionSet& other) {
    bits_ |= other.bits_;
}

void ActionSet::remove(ActionType a) {
    bits_.reset(static_cast<size_t>(a));
    bits_.reset(static_cast<size_t>(ActionType::anyAction));
}

void ActionSet::removeAll(const ActionSet& other) {
    bits_ &= ~other.bits_;
    if (other.bits_.any()) bits_.reset(static_cast<size_t>(ActionType::anyAction));
}

std::vector<std::string_view> ActionSet::names() const {
    if (contains(ActionType::anyAction)) return {actionName(ActionType::anyAction)};
    std::vector<std::string_view> out;
    for (size_t i = 0; i < kNumActionTypes; ++i)
        if (bits_.test(i)) out.push_back(kNames[i]);
    return out;
}

}  // namespace halo::store::authz
