// Table-driven tests of the aggregation stages over an in-memory source:
// each case is (input documents, pipeline, expected output or error code),
// all as extended JSON. Outputs are compared as canonical extended JSON, so
// field order and numeric types must match exactly.
#include "store/aggregate/pipeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bson/doc.h"
#include "store/aggregate/vector_source.h"

namespace halo::aggregate {
namespace {

struct Case {
    const char* name;
    const char* input;      // JSON array of documents
    const char* pipeline;   // JSON array of stages
    const char* expected;   // JSON array of documents (ignored when error != 0)
    int error = 0;          // expected error code
    bool anyOrder = false;  // compare as multisets
};

std::vector<bson::Doc> docsOf(const char* jsonArray) {
    std::string wrapped = std::string(R"({"a": )") + jsonArray + "}";
    bson::Doc d = bson::Doc::fromJsonOrDie(wrapped);
    std::vector<bson::Doc> out;
    bson_iter_t it, a;
    bson_iter_init_find(&it, d.get(), "a");
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&a, &len, &data);
        out.push_back(bson::Doc::copyOf(data, len));
    }
    return out;
}

bson::Doc arrayOf(const char* jsonArray) {
    std::string wrapped = std::string(R"({"a": )") + jsonArray + "}";
    bson::Doc d = bson::Doc::fromJsonOrDie(wrapped);
    bson_t arr;
    bson::subDocument(d.get(), "a", &arr);
    return bson::Doc::copyOf(&arr);
}

std::string canonical(const bson_t* b) {
    char* s = bson_as_canonical_extended_json(b, nullptr);
    std::string out(s);
    bson_free(s);
    return out;
}

std::vector<std::string> run(const char* input, const char* pipeline, PipelineContext ctx = {}) {
    bson::Doc stages = arrayOf(pipeline);
    auto p = buildPipeline(std::make_unique<VectorSource>(docsOf(input)), stages.get(), ctx);
    store::Session s(nullptr);
    std::vector<std::string> out;
    while (auto d = p->next(s)) out.push_back(canonical(d->get()));
    return out;
}

std::vector<std::string> expectedOf(const char* json) {
    std::vector<std::string> out;
    for (const auto& d : docsOf(json)) out.push_back(canonical(d.get()));
    return out;
}

class StageTest : public ::testing::TestWithParam<Case> {};

TEST_P(StageTest, Runs) {
    const Case& c = GetParam();
    PipelineContext ctx;
    ctx.db = "test";
    ctx.ns = "test.c";
    ctx.nowMillis = 1700000000000;
    ctx.randomSeed = 42;
    if (c.error != 0) {
        try {
            auto out = run(c.input, c.pipeline, ctx);
            FAIL() << "expected error " << c.error << ", got " << out.size() << " documents";
        } catch (const DBException& e) {
            EXPECT_EQ(static_cast<int>(e.code()), c.error) << e.what();
        }
        return;
    }
    std::vector<std::string> got;
    try {
        got = run(c.input, c.pipeline, ctx);
    } catch (const DBException& e) {
        FAIL() << "error " << static_cast<int>(e.code()) << ": " << e.what();
    }
    auto want = expectedOf(c.expected);
    if (c.anyOrder) {
        std::sort(got.begin(), got.end());
        std::sort(want.begin(), want.end());
    }
    EXPECT_EQ(got, want);
}

const char* kPeople = R"([
  {"_id": 1, "name": "ann", "age": 30, "city": "oslo", "tags": ["a", "b"]},
  {"_id": 2, "name": "bob", "age": 25, "city": "rome", "tags": []},
  {"_id": 3, "name": "cid", "age": 35, "city": "oslo"},
  {"_id": 4, "name": "dan", "age": 25, "city": "rome", "tags": "x"},
  {"_id": 5, "name": "eve", "city": null, "tags": null}
])";

const Case kCases[] = {
    // ---- $match
    {"match_eq", kPeople, R"([{"$match": {"city": "oslo"}}, {"$project": {"name": 1}}])",
     R"([{"_id": 1, "name": "ann"}, {"_id": 3, "name": "cid"}])"},
    {"match_expr", kPeople,
     R"([{"$match": {"$expr": {"$gt": ["$age", 29]}}}, {"$project": {"_id": 1}}])",
     R"([{"_id": 1}, {"_id": 3}])"},
    {"match_not_object", kPeople, R"([{"$match": 1}])", "[]", 15959},
    // ---- $project
    {"project_inclusion_keeps_doc_order", R"([{"_id": 1, "b": 2, "a": 1, "c": 3}])",
     R"([{"$project": {"a": 1, "b": 1}}])", R"([{"_id": 1, "b": 2, "a": 1}])"},
    {"project_exclusion", R"([{"_id": 1, "b": 2, "a": 1, "c": {"d": 1, "e": 2}}])",
     R"([{"$project": {"a": 0, "c.d": 0}}])", R"([{"_id": 1, "b": 2, "c": {"e": 2}}])"},
    {"project_id_excluded", R"([{"_id": 1, "a": 1}])", R"([{"$project": {"_id": 0, "a": 1}}])",
     R"([{"a": 1}])"},
    {"project_computed", R"([{"_id": 1, "a": 2, "b": 3}])",
     R"([{"$project": {"s": {"$add": ["$a", "$b"]}, "a": 1, "lit": {"$literal": 1}}}])",
     R"([{"_id": 1, "a": 2, "s": 5, "lit": 1}])"},
    {"project_nested_inclusion_over_array", R"([{"_id": 1, "a": [{"b": 1, "c": 2}, 5, {"c": 3}]}])",
     R"([{"$project": {"a.b": 1}}])", R"([{"_id": 1, "a": [{"b": 1}, {}]}])"},
    {"project_nested_spec", R"([{"_id": 1, "a": {"b": 1, "c": 2}}])",
     R"([{"$project": {"a": {"c": 1}}}])", R"([{"_id": 1, "a": {"c": 2}}])"},
    {"project_remove", R"([{"_id": 1, "a": 2}])", R"([{"$project": {"x": "$$REMOVE", "a": 1}}])",
     R"([{"_id": 1, "a": 2}])"},
    {"project_empty", kPeople, R"([{"$project": {}}])", "[]", 51272},
    {"project_mixed", kPeople, R"([{"$project": {"a": 1, "b": 0}}])", "[]", 31253},
    {"project_mixed2", kPeople, R"([{"$project": {"a": 0, "b": 1}}])", "[]", 31254},
    {"project_collision", kPeople, R"([{"$project": {"a": 1, "a.b": 1}}])", "[]", 31250},
    // ---- $addFields / $set / $unset
    {"addFields", R"([{"_id": 1, "a": 1, "b": {"c": 1}}])",
     R"([{"$addFields": {"a": 5, "z": {"$multiply": ["$a", 10]}, "b.d": 2}}])",
     R"([{"_id": 1, "a": 5, "b": {"c": 1, "d": 2}, "z": 10}])"},
    {"set_nested_object_merges", R"([{"_id": 1, "b": {"c": 1}}])",
     R"([{"$set": {"b": {"d": "$b.c"}}}])", R"([{"_id": 1, "b": {"c": 1, "d": 1}}])"},
    {"set_over_array", R"([{"_id": 1, "a": [{"x": 1}, 7]}])", R"([{"$set": {"a.y": 1}}])",
     R"([{"_id": 1, "a": [{"x": 1, "y": 1}, {"y": 1}]}])"},
    {"set_remove", R"([{"_id": 1, "a": 1, "b": 2}])", R"([{"$set": {"a": "$$REMOVE"}}])",
     R"([{"_id": 1, "b": 2}])"},
    {"unset", R"([{"_id": 1, "a": 1, "b": {"c": 1, "d": 2}}])", R"([{"$unset": ["a", "b.c"]}])",
     R"([{"_id": 1, "b": {"d": 2}}])"},
    {"unset_string", R"([{"_id": 1, "a": 1}])", R"([{"$unset": "a"}])", R"([{"_id": 1}])"},
    {"unset_bad", kPeople, R"([{"$unset": 1}])", "[]", 31002},
    {"unset_bad_elem", kPeople, R"([{"$unset": ["a", 1]}])", "[]", 31120},
    // ---- $group
    {"group_count_docs", kPeople,
     R"([{"$match": {"city": "oslo"}}, {"$group": {"_id": 1, "n": {"$sum": 1}}}])",
     R"([{"_id": 1, "n": 2}])"},
    {"group_by_field", kPeople,
     R"([{"$group": {"_id": "$city", "n": {"$sum": 1}, "ages": {"$sum": "$age"}, "avg": {"$avg": "$age"},
                     "min": {"$min": "$age"}, "max": {"$max": "$age"}, "names": {"$push": "$name"},
                     "first": {"$first": "$name"}, "last": {"$last": "$age"}}}])",
     R"([{"_id": "oslo", "n": 2, "ages": 65, "avg": 32.5, "min": 30, "max": 35, "names": ["ann", "cid"], "first": "ann", "last": 35},
         {"_id": "rome", "n": 2, "ages": 50, "avg": 25.0, "min": 25, "max": 25, "names": ["bob", "dan"], "first": "bob", "last": 25},
         {"_id": null, "n": 1, "ages": 0, "avg": null, "min": null, "max": null, "names": ["eve"], "first": "eve", "last": null}])"},
    {"group_null_id", kPeople,
     R"([{"$group": {"_id": null, "total": {"$sum": "$age"}, "c": {"$count": {}}}}])",
     R"([{"_id": null, "total": 115, "c": 5}])"},
    {"group_compound_id", kPeople,
     R"([{"$match": {"age": {"$exists": true}}}, {"$group": {"_id": {"c": "$city", "a": "$age"}, "n": {"$sum": 1}}}])",
     R"([{"_id": {"c": "oslo", "a": 30}, "n": 1}, {"_id": {"c": "rome", "a": 25}, "n": 2}, {"_id": {"c": "oslo", "a": 35}, "n": 1}])"},
    {"group_numeric_key_equivalence", R"([{"k": 1}, {"k": 1.0}, {"k": {"$numberLong": "1"}}])",
     R"([{"$group": {"_id": "$k", "n": {"$sum": 1}}}])", R"([{"_id": 1, "n": 3}])"},
    {"group_sum_types", R"([{"v": 1}, {"v": {"$numberLong": "2"}}, {"v": "x"}])",
     R"([{"$group": {"_id": null, "s": {"$sum": "$v"}}}])",
     R"([{"_id": null, "s": {"$numberLong": "3"}}])"},
    {"group_sum_overflow_int32", R"([{"v": 2147483647}, {"v": 1}])",
     R"([{"$group": {"_id": null, "s": {"$sum": "$v"}}}])",
     R"([{"_id": null, "s": {"$numberLong": "2147483648"}}])"},
    {"group_sum_double", R"([{"v": 1}, {"v": 0.5}])",
     R"([{"$group": {"_id": null, "s": {"$sum": "$v"}}}])", R"([{"_id": null, "s": 1.5}])"},
    {"group_addToSet_merge_stddev",
     R"([{"a": 1, "o": {"x": 1}}, {"o": {"y": 2}}, {"a": 3, "o": null}])",
     R"([{"$group": {"_id": null, "s": {"$addToSet": "$a"}, "m": {"$mergeObjects": "$o"},
                     "p": {"$stdDevPop": "$a"}, "q": {"$stdDevSamp": "$a"}}}])",
     R"([{"_id": null, "s": [1, 3], "m": {"x": 1, "y": 2}, "p": 1.0, "q": 1.4142135623730951}])"},
    {"group_no_id", kPeople, R"([{"$group": {"n": {"$sum": 1}}}])", "[]", 15955},
    {"group_unknown_acc", kPeople, R"([{"$group": {"_id": null, "n": {"$foo": 1}}}])", "[]", 15952},
    {"group_not_acc", kPeople, R"([{"$group": {"_id": null, "n": 1}}])", "[]", 40234},
    {"group_dotted", kPeople, R"([{"$group": {"_id": null, "a.b": {"$sum": 1}}}])", "[]", 40235},
    {"group_two_accs", kPeople, R"([{"$group": {"_id": null, "n": {"$sum": 1, "$avg": 1}}}])", "[]",
     40238},
    {"group_unary", kPeople, R"([{"$group": {"_id": null, "n": {"$sum": [1, 2]}}}])", "[]", 40237},
    {"group_not_object", kPeople, R"([{"$group": 1}])", "[]", 15947},
    // ---- $sort / $skip / $limit
    {"sort_multi", kPeople, R"([{"$sort": {"age": -1, "name": 1}}, {"$project": {"_id": 1}}])",
     R"([{"_id": 3}, {"_id": 1}, {"_id": 2}, {"_id": 4}, {"_id": 5}])"},
    {"sort_array_values",
     R"([{"_id": 1, "a": [5, 1]}, {"_id": 2, "a": 3}, {"_id": 3, "a": [2, 4]}])",
     R"([{"$sort": {"a": 1}}])",
     R"([{"_id": 1, "a": [5, 1]}, {"_id": 3, "a": [2, 4]}, {"_id": 2, "a": 3}])"},
    {"sort_topk", kPeople,
     R"([{"$sort": {"age": 1, "_id": 1}}, {"$limit": 2}, {"$project": {"_id": 1}}])",
     R"([{"_id": 5}, {"_id": 2}])"},
    {"sort_topk_desc", kPeople,
     R"([{"$sort": {"_id": -1}}, {"$limit": 3}, {"$project": {"_id": 1}}])",
     R"([{"_id": 5}, {"_id": 4}, {"_id": 3}])"},
    {"skip_limit", kPeople, R"([{"$skip": 1}, {"$limit": 2}, {"$project": {"_id": 1}}])",
     R"([{"_id": 2}, {"_id": 3}])"},
    {"limit_zero", kPeople, R"([{"$limit": 0}])", "[]", 15958},
    {"limit_string", kPeople, R"([{"$limit": "a"}])", "[]", 15957},
    {"skip_negative", kPeople, R"([{"$skip": -1}])", "[]", 15956},
    {"sort_empty", kPeople, R"([{"$sort": {}}])", "[]", 15976},
    {"sort_bad", kPeople, R"([{"$sort": {"a": 2}}])", "[]", 15975},
    // ---- $count / $sortByCount
    {"count", kPeople, R"([{"$match": {"age": {"$gte": 30}}}, {"$count": "n"}])", R"([{"n": 2}])"},
    {"count_none", kPeople, R"([{"$match": {"age": 99}}, {"$count": "n"}])", "[]"},
    {"count_bad", kPeople, R"([{"$count": "$n"}])", "[]", 40158},
    {"count_empty", kPeople, R"([{"$count": ""}])", "[]", 40156},
    {"sortByCount", kPeople, R"([{"$sortByCount": "$age"}, {"$limit": 1}])",
     R"([{"_id": 25, "count": 2}])"},
    {"sortByCount_bad", kPeople, R"([{"$sortByCount": "age"}])", "[]", 40148},
    // ---- $unwind
    {"unwind_string", kPeople, R"([{"$unwind": "$tags"}, {"$project": {"tags": 1}}])",
     R"([{"_id": 1, "tags": "a"}, {"_id": 1, "tags": "b"}, {"_id": 4, "tags": "x"}])"},
    {"unwind_preserve_index", kPeople,
     R"([{"$unwind": {"path": "$tags", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}},
         {"$project": {"tags": 1, "i": 1}}])",
     R"([{"_id": 1, "tags": "a", "i": {"$numberLong": "0"}}, {"_id": 1, "tags": "b", "i": {"$numberLong": "1"}},
         {"_id": 2, "i": null}, {"_id": 3, "i": null}, {"_id": 4, "tags": "x", "i": null},
         {"_id": 5, "tags": null, "i": null}])"},
    {"unwind_nested", R"([{"_id": 1, "a": {"b": [1, 2]}}])", R"([{"$unwind": "$a.b"}])",
     R"([{"_id": 1, "a": {"b": 1}}, {"_id": 1, "a": {"b": 2}}])"},
    {"unwind_no_dollar", kPeople, R"([{"$unwind": "tags"}])", "[]", 28818},
    {"unwind_no_path", kPeople, R"([{"$unwind": {"includeArrayIndex": "i"}}])", "[]", 28812},
    {"unwind_bad_option", kPeople, R"([{"$unwind": {"path": "$a", "foo": 1}}])", "[]", 28811},
    {"unwind_bad_type", kPeople, R"([{"$unwind": 1}])", "[]", 15981},
    // ---- $replaceRoot / $replaceWith
    {"replaceRoot", R"([{"_id": 1, "a": {"x": 1}}])", R"([{"$replaceRoot": {"newRoot": "$a"}}])",
     R"([{"x": 1}])"},
    {"replaceWith", R"([{"_id": 1, "a": {"x": 1}}])",
     R"([{"$replaceWith": {"$mergeObjects": [{"y": 2}, "$a"]}}])", R"([{"y": 2, "x": 1}])"},
    {"replaceRoot_not_object", R"([{"_id": 1, "a": 1}])",
     R"([{"$replaceRoot": {"newRoot": "$a"}}])", "[]", 40228},
    {"replaceRoot_missing", R"([{"_id": 1}])", R"([{"$replaceRoot": {}}])", "[]", 40414},
    // ---- $facet / $bucket / $sample / $documents
    {"facet", kPeople,
     R"([{"$facet": {"n": [{"$count": "n"}], "top": [{"$sort": {"age": -1}}, {"$limit": 1}, {"$project": {"name": 1, "_id": 0}}]}}])",
     R"([{"n": [{"n": 5}], "top": [{"name": "cid"}]}])"},
    {"facet_empty", kPeople, R"([{"$facet": {}}])", "[]", 40169},
    {"facet_not_array", kPeople, R"([{"$facet": {"a": 1}}])", "[]", 40170},
    {"facet_nested", kPeople, R"([{"$facet": {"a": [{"$facet": {"b": [{"$limit": 1}]}}]}}])", "[]",
     40600},
    {"bucket", kPeople,
     R"([{"$bucket": {"groupBy": "$age", "boundaries": [20, 30, 40], "default": "other",
                      "output": {"n": {"$sum": 1}, "names": {"$push": "$name"}}}}])",
     R"([{"_id": 20, "n": 2, "names": ["bob", "dan"]}, {"_id": 30, "n": 2, "names": ["ann", "cid"]},
         {"_id": "other", "n": 1, "names": ["eve"]}])"},
    {"bucket_no_default", kPeople, R"([{"$bucket": {"groupBy": "$age", "boundaries": [20, 30]}}])",
     "[]", 40066},
    {"sample_size", kPeople, R"([{"$sample": {"size": 2}}, {"$count": "n"}])", R"([{"n": 2}])"},
    {"sample_bad", kPeople, R"([{"$sample": {"size": -1}}])", "[]", 28747},
    {"documents", "[]", R"([{"$documents": [{"a": 1}, {"a": 2}]}, {"$match": {"a": 2}}])",
     R"([{"a": 2}])"},
    // ---- pipeline shape
    {"unknown_stage", kPeople, R"([{"$foo": 1}])", "[]", 40324},
    {"two_fields", kPeople, R"([{"$match": {}, "$limit": 1}])", "[]", 40323},
    {"empty_stage", kPeople, R"([{}])", "[]", 40323},
    // The aggregate command takes a final $out/$merge off; the pipeline refuses them.
    {"out_misplaced", kPeople, R"([{"$out": "x"}])", "[]", 40601},
    {"merge_misplaced", kPeople, R"([{"$merge": {"into": "x"}}])", "[]", 40601},
    {"empty_pipeline", R"([{"a": 1}])", "[]", R"([{"a": 1}])"},
};

TEST(AggregateStage, LookupEquality) {
    PipelineContext ctx;
    ctx.db = "test";
    ctx.foreignSource = [](const std::string& coll) -> std::unique_ptr<store::DocStream> {
        if (coll != "items") return std::make_unique<VectorSource>(std::vector<bson::Doc>{});
        return std::make_unique<VectorSource>(docsOf(R"([{"_id": 10, "k": 1}, {"_id": 11, "k": 2},
                                                         {"_id": 12, "k": 1}, {"_id": 13}])"));
    };
    auto out =
        run(R"([{"_id": 1, "k": 1}, {"_id": 2, "k": [2, 3]}, {"_id": 3}])",
            R"([{"$lookup": {"from": "items", "localField": "k", "foreignField": "k", "as": "m"}},
                       {"$project": {"m._id": 1}}])",
            ctx);
    EXPECT_EQ(
        out,
        expectedOf(R"([{"_id": 1, "m": [{"_id": 10}, {"_id": 12}]}, {"_id": 2, "m": [{"_id": 11}]},
                                  {"_id": 3, "m": [{"_id": 13}]}])"));
}

TEST(AggregateStage, LookupPipelineWithLet) {
    PipelineContext ctx;
    ctx.db = "test";
    ctx.foreignSource = [](const std::string&) -> std::unique_ptr<store::DocStream> {
        return std::make_unique<VectorSource>(
            docsOf(R"([{"_id": 10, "k": 1, "q": 5}, {"_id": 11, "k": 2, "q": 1},
                                                         {"_id": 12, "k": 1, "q": 9}])"));
    };
    auto out = run(R"([{"_id": 1, "k": 1, "min": 6}, {"_id": 2, "k": 2, "min": 0}])",
                   R"([{"$lookup": {"from": "items", "let": {"kk": "$k", "mn": "$min"},
                                    "pipeline": [{"$match": {"$expr": {"$and": [{"$eq": ["$k", "$$kk"]},
                                                                               {"$gte": ["$q", "$$mn"]}]}}},
                                                 {"$project": {"_id": 1}}],
                                    "as": "m"}}])",
                   ctx);
    EXPECT_EQ(out, expectedOf(R"([{"_id": 1, "k": 1, "min": 6, "m": [{"_id": 12}]},
                                  {"_id": 2, "k": 2, "min": 0, "m": [{"_id": 11}]}])"));
}

TEST(AggregateStage, LookupErrors) {
    PipelineContext ctx;
    EXPECT_THROW(
        run("[]", R"([{"$lookup": {"from": "x", "localField": "a", "foreignField": "b"}}])", ctx),
        DBException);
    EXPECT_THROW(run("[]", R"([{"$lookup": {"from": "x", "localField": "a", "as": "b"}}])", ctx),
                 DBException);
    EXPECT_THROW(run("[]", R"([{"$lookup": 1}])", ctx), DBException);
}

TEST(AggregateStage, SortMemoryLimit) {
    std::string input = "[";
    for (int i = 0; i < 200; ++i)
        input += (i ? "," : "") + std::string(R"({"a": )") + std::to_string(i) + "}";
    input += "]";
    PipelineContext ctx;
    ctx.memoryLimitBytes = 1000;
    try {
        run(input.c_str(), R"([{"$sort": {"a": 1}}])", ctx);
        FAIL() << "expected QueryExceededMemoryLimitNoDiskUseAllowed";
    } catch (const DBException& e) {
        EXPECT_EQ(e.code(), ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed);
    }
    // Top-k keeps memory bounded; allowDiskUse lifts the limit.
    EXPECT_EQ(run(input.c_str(), R"([{"$sort": {"a": -1}}, {"$limit": 1}])", ctx),
              expectedOf(R"([{"a": 199}])"));
    ctx.allowDiskUse = true;
    EXPECT_EQ(run(input.c_str(), R"([{"$sort": {"a": 1}}])", ctx).size(), 200u);
    ctx.allowDiskUse = false;
    EXPECT_THROW(
        run(input.c_str(), R"([{"$group": {"_id": "$a", "v": {"$push": "$$ROOT"}}}])", ctx),
        DBException);
}

TEST(AggregateStage, ResumableAcrossCalls) {
    // A pipeline keeps only its logical position between next() calls.
    bson::Doc stages = arrayOf(R"([{"$unwind": "$a"}, {"$skip": 1}])");
    auto p =
        buildPipeline(std::make_unique<VectorSource>(docsOf(R"([{"a": [1, 2, 3]}, {"a": [4]}])")),
                      stages.get(), PipelineContext{});
    std::vector<std::string> got;
    for (int batch = 0; batch < 4; ++batch) {
        store::Session s(nullptr);  // a fresh session per "getMore"
        if (auto d = p->next(s)) got.push_back(canonical(d->get()));
    }
    EXPECT_EQ(got, expectedOf(R"([{"a": 2}, {"a": 3}, {"a": 4}])"));
}

TEST(AggregateStage, CommandLetVariables) {
    PipelineContext ctx;
    ctx.setVariable("target", query::Value::fromInt32(25));
    auto out = run(kPeople, R"([{"$match": {"$expr": {"$eq": ["$age", "$$target"]}}},
                                {"$project": {"_id": 1, "t": "$$target"}}])",
                   ctx);
    EXPECT_EQ(out, expectedOf(R"([{"_id": 2, "t": 25}, {"_id": 4, "t": 25}])"));
}

INSTANTIATE_TEST_SUITE_P(Stages, StageTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) {
                             return std::string(i.param.name);
                         });

}  // namespace
}  // namespace halo::aggregate
