#include "bench/runner.h"

#include <gtest/gtest.h>

namespace halo::bench {
namespace {

RunReport withMisses() {
    RunReport r;
    r.ops["READ"].ok = 90;
    r.ops["READ"].notFound = 8;
    r.ops["UPDATE"].ok = 5;
    r.ops["UPDATE"].notFound = 2;
    r.ops["INSERT"].ok = 5;
    r.notFound = 10;
    r.overall.ok = 100;
    r.overall.notFound = 10;
    return r;
}

TEST(RunnerTest, ExitStatusFailedThenNotFound) {
    RunReport r;
    EXPECT_EQ(exitStatus(r, false), 0);
    r = withMisses();
    EXPECT_EQ(exitStatus(r, false), kExitNotFound);
    EXPECT_EQ(exitStatus(r, true), 0);  // --expect-misses
    r.failed = 1;
    EXPECT_EQ(exitStatus(r, false), kExitFailedOperations);
    EXPECT_EQ(exitStatus(r, true), kExitFailedOperations);
    EXPECT_NE(kExitNotFound, kExitFailedOperations);
}

TEST(RunnerTest, NotFoundIsInTheJsonPerOperationAndOverall) {
    RunOptions ro;
    ro.label = "x";
    std::string j = toJson(withMisses(), WorkloadSpec::preset("shop").getValue(), ro);
    EXPECT_NE(j.find(R"("not_found":10,"expect_misses":false)"), std::string::npos) << j;
    EXPECT_NE(j.find(R"("overall":{"ok":100,"failed":0,"not_found":10,)"), std::string::npos) << j;
    EXPECT_NE(j.find(R"("READ":{"ok":90,"failed":0,"not_found":8,)"), std::string::npos) << j;
    EXPECT_NE(j.find(R"("UPDATE":{"ok":5,"failed":0,"not_found":2,)"), std::string::npos) << j;
    EXPECT_NE(j.find(R"("INSERT":{"ok":5,"failed":0,"not_found":0,)"), std::string::npos) << j;
    std::string extra =
        toJson(RunReport{}, WorkloadSpec::preset("shop").getValue(), ro, R"("a":1,"b":null)");
    EXPECT_NE(extra.find(R"("a":1,"b":null,"per_second":[])"), std::string::npos) << extra;
}

TEST(RunnerTest, TableShowsNotFoundAndSaysWhy) {
    RunReport r = withMisses();
    EXPECT_EQ(notFoundByOperation(r), "READ 8, UPDATE 2");
    EXPECT_EQ(notFoundByOperation(RunReport{}), "");
    std::string t = toTable(r);
    EXPECT_NE(t.find("NOT_FOUND"), std::string::npos);
    EXPECT_NE(t.find("10 NOT_FOUND"), std::string::npos);
    EXPECT_NE(t.find("NOT_FOUND (READ 8, UPDATE 2): these operations found no document"),
              std::string::npos)
        << t;
    EXPECT_NE(t.find("exit status 5"), std::string::npos);
    EXPECT_NE(toTable(r, true).find("expected (--expect-misses)"), std::string::npos);
    EXPECT_EQ(toTable(RunReport{}).find("these operations"), std::string::npos);
}

}  // namespace
}  // namespace halo::bench
