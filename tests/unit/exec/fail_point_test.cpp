// FailPoint: configureFailPoint's mode and data parsing with mongod's errors,
// and how each mode counts activations (only those the predicate accepts).
#include "store/rules/fail_point.h"

#include <gtest/gtest.h>

namespace halo::store {
namespace {

FailPoint::Settings parse(const char* json) {
    auto cmd = bson::Doc::fromJsonOrDie(json);
    auto sw = FailPoint::parse(cmd.get());
    EXPECT_TRUE(sw.isOK()) << sw.getStatus().toString();
    return sw.getValue();
}

ErrorCode parseError(const char* json) {
    auto cmd = bson::Doc::fromJsonOrDie(json);
    auto sw = FailPoint::parse(cmd.get());
    EXPECT_FALSE(sw.isOK()) << json;
    return sw.getStatus().code();
}

int fires(FailPoint& fp, int attempts, bool applies = true) {
    int n = 0;
    for (int i = 0; i < attempts; ++i)
        if (fp.fire([&](const bson_t*) { return applies; })) ++n;
    return n;
}

TEST(FailPointTest, ParsesModesAndData) {
    auto s = parse(R"({"configureFailPoint": "failCommand", "mode": {"times": 3},
                       "data": {"errorCode": 91}})");
    EXPECT_EQ(s.mode, FailPoint::Mode::Times);
    EXPECT_EQ(s.count, 3);
    EXPECT_NE(s.data->toJson().find("91"), std::string::npos);
    EXPECT_EQ(parse(R"({"c": "f", "mode": "alwaysOn"})").mode, FailPoint::Mode::AlwaysOn);
    EXPECT_EQ(parse(R"({"c": "f", "mode": "off"})").mode, FailPoint::Mode::Off);
    EXPECT_EQ(parse(R"({"c": "f", "mode": {"skip": 2}})").mode, FailPoint::Mode::Skip);
    EXPECT_EQ(parse(R"({"c": "f", "mode": {"activationProbability": 0.5}})").mode,
              FailPoint::Mode::Random);
}

TEST(FailPointTest, RejectsBadModesAsMongod) {
    EXPECT_EQ(parseError(R"({"c": "f"})"), ErrorCode::IllegalOperation);
    EXPECT_EQ(parseError(R"({"c": "f", "mode": "sometimes"})"), ErrorCode::BadValue);
    EXPECT_EQ(parseError(R"({"c": "f", "mode": 1})"), ErrorCode::TypeMismatch);
    EXPECT_EQ(parseError(R"({"c": "f", "mode": {"times": -1}})"), ErrorCode::BadValue);
    EXPECT_EQ(parseError(R"({"c": "f", "mode": {"times": "x"}})"), ErrorCode::TypeMismatch);
    EXPECT_EQ(parseError(R"({"c": "f", "mode": {"times": 1.5}})"), ErrorCode::BadValue);
    EXPECT_EQ(parseError(R"({"c": "f", "mode": {"other": 1}})"), ErrorCode::BadValue);
    EXPECT_EQ(parseError(R"({"c": "f", "mode": {"activationProbability": 2}})"),
              ErrorCode::BadValue);
    EXPECT_EQ(parseError(R"({"c": "f", "mode": "alwaysOn", "data": 1})"), ErrorCode::TypeMismatch);
}

TEST(FailPointTest, TimesFiresThatOftenThenTurnsOff) {
    FailPoint fp;
    EXPECT_EQ(fp.configure(parse(R"({"c": "f", "mode": {"times": 2}})")), 0);
    EXPECT_EQ(fires(fp, 1, false), 0);  // not about this operation: not counted
    EXPECT_EQ(fires(fp, 5), 2);
    EXPECT_FALSE(fp.maybeOn());
    EXPECT_EQ(fp.timesEntered(), 2);
    // The count survives reconfiguration: configure returns it.
    EXPECT_EQ(fp.configure(parse(R"({"c": "f", "mode": "off"})")), 2);
}

TEST(FailPointTest, SkipLetsThatManyPassThenAlwaysFires) {
    FailPoint fp;
    fp.configure(parse(R"({"c": "f", "mode": {"skip": 2}})"));
    EXPECT_EQ(fires(fp, 3, false), 0);  // rejected by the predicate: not skipped either
    EXPECT_EQ(fires(fp, 2), 0);
    EXPECT_EQ(fires(fp, 3), 3);
    EXPECT_EQ(fp.timesEntered(), 3);
}

TEST(FailPointTest, AlwaysOnOffTimesZeroAndProbability) {
    FailPoint fp;
    EXPECT_EQ(fires(fp, 2), 0);  // never configured
    fp.configure(parse(R"({"c": "f", "mode": "alwaysOn"})"));
    EXPECT_EQ(fires(fp, 4), 4);
    fp.configure(parse(R"({"c": "f", "mode": "off"})"));
    EXPECT_EQ(fires(fp, 4), 0);
    fp.configure(parse(R"({"c": "f", "mode": {"times": 0}})"));
    EXPECT_EQ(fires(fp, 4), 1);  // mongod's quirk: like {times: 1}
    fp.configure(parse(R"({"c": "f", "mode": {"activationProbability": 0}})"));
    EXPECT_EQ(fires(fp, 20), 0);
    fp.configure(parse(R"({"c": "f", "mode": {"activationProbability": 1}})"));
    EXPECT_EQ(fires(fp, 20), 20);
}

TEST(FailPointTest, KnowsMongodNames) {
    FailPoints fps;
    EXPECT_EQ(fps.find("failCommand"), &fps.failCommand);
    EXPECT_EQ(fps.find("onPrimaryTransactionalWrite"), &fps.onPrimaryTransactionalWrite);
    EXPECT_EQ(fps.find("failGetMoreAfterCursorCheckout"), &fps.failGetMoreAfterCursorCheckout);
    EXPECT_EQ(fps.find("noSuchFailPoint"), nullptr);
}

}  // namespace
}  // namespace halo::store
