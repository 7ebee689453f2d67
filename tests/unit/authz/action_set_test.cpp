// Action names parse and print as mongod spells them; anyAction means every action.
#include "store/authz/action_set.h"

#include <gtest/gtest.h>

namespace halo::store::authz {
namespace {

TEST(ActionSet, EveryNameRoundTrips) {
    for (size_t i = 0; i < kNumActionTypes; ++i) {
        auto a = static_cast<ActionType>(i);
        auto parsed = parseAction(actionName(a));
        ASSERT_TRUE(parsed.has_value()) << actionName(a);
        EXPECT_EQ(*parsed, a);
    }
}

TEST(ActionSet, NamesAreCaseSensitiveAndUnknownOnesAreRefused) {
    EXPECT_EQ(parseAction("find"), ActionType::find);
    EXPECT_EQ(parseAction("killop"), ActionType::killop);
    EXPECT_FALSE(parseAction("Find"));
    EXPECT_FALSE(parseAction("fakeAction"));
    EXPECT_FALSE(parseAction(""));
}

TEST(ActionSet, MembersComeOutInAsciiOrder) {
    ActionSet s{ActionType::update, ActionType::find, ActionType::insert, ActionType::dbHash};
    std::vector<std::string_view> want{"dbHash", "find", "insert", "update"};
    EXPECT_EQ(s.names(), want);
}

TEST(ActionSet, AnyActionHoldsEveryActionUntilOneIsRemoved) {
    ActionSet all{ActionType::anyAction};
    EXPECT_TRUE(all.contains(ActionType::shutdown));
    EXPECT_TRUE(all.containsAll(ActionSet{ActionType::find, ActionType::viewUser}));
    EXPECT_EQ(all.names(), std::vector<std::string_view>{"anyAction"});
    all.remove(ActionType::shutdown);
    EXPECT_FALSE(all.contains(ActionType::anyAction));
    EXPECT_FALSE(all.contains(ActionType::shutdown));
    EXPECT_TRUE(all.contains(ActionType::find));
}

TEST(ActionSet, ContainsAllAndRemoveAll) {
    ActionSet s{ActionType::find, ActionType::insert};
    EXPECT_TRUE(s.containsAll({ActionType::find}));
    EXPECT_FALSE(s.containsAll({ActionType::find, ActionType::remove}));
    EXPECT_TRUE(s.containsAll({}));
    s.removeAll({ActionType::find, ActionType::remove});
    EXPECT_EQ(s, ActionSet{ActionType::insert});
}

}  // namespace
}  // namespace halo::store::authz
