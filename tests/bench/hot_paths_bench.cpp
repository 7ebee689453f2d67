// Google Benchmark for the store's hot paths: frame decode, matcher, index key
// encoding and key generation. Figures are printed, never asserted.
#include <benchmark/benchmark.h>

#include "bson/doc.h"
#include "store/query/matcher.h"
#include "store/storage/index_keys.h"
#include "store/storage/key_string.h"
#include "wire/message.h"

namespace {

using halo::bson::Doc;

const Doc& sampleDoc() {
    static Doc d = Doc::fromJsonOrDie(
        R"({"_id": {"$oid": "65a1b2c3d4e5f60718293a4b"}, "user": "user8812", "ts": {"$date": "2026-11-30T10:00:00Z"},
            "status": "shipped", "total": 129.5, "items": [{"sku": "a1", "qty": 2}, {"sku": "b7", "qty": 1}],
            "field0": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})");
    return d;
}

void BM_FrameDecode(benchmark::State& state) {
    auto body =
        Doc::fromJsonOrDie(R"({"find": "orders", "filter": {"_id": 42}, "limit": 1, "$db": "shop",
                                       "lsid": {"id": {"$binary": {"base64": "AAAAAAAAAAAAAAAAAAAAAA==", "subType": "04"}}}})");
    auto frame = halo::wire::buildOpMsg(1, 0, body.get());
    for (auto _ : state) {
        auto h = halo::wire::parseHeader(frame);
        auto m = halo::wire::parseOpMsg(frame);
        benchmark::DoNotOptimize(h);
        benchmark::DoNotOptimize(m);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * frame.size()));
}
BENCHMARK(BM_FrameDecode);

void BM_MatcherSimple(benchmark::State& state) {
    auto filter = Doc::fromJsonOrDie(R"({"status": "shipped", "total": {"$gte": 100}})");
    auto m = halo::query::Matcher::parse(filter.get());
    for (auto _ : state) benchmark::DoNotOptimize(m.getValue()->matches(sampleDoc().get()));
}
BENCHMARK(BM_MatcherSimple);

void BM_MatcherArrayPath(benchmark::State& state) {
    auto filter = Doc::fromJsonOrDie(
        R"({"items": {"$elemMatch": {"sku": "b7", "qty": {"$gte": 1}}}, "user": {"$in": ["user1", "user8812"]}})");
    auto m = halo::query::Matcher::parse(filter.get());
    for (auto _ : state) benchmark::DoNotOptimize(m.getValue()->matches(sampleDoc().get()));
}
BENCHMARK(BM_MatcherArrayPath);

void BM_KeyStringEncode(benchmark::State& state) {
    bson_iter_t it;
    halo::bson::find(sampleDoc().get(), "user", &it);
    bson_value_t v = *bson_iter_value(&it);
    std::string out;
    for (auto _ : state) {
        out.clear();
        halo::store::keystring::appendValue(out, v, false);
        halo::store::keystring::appendRecordId(out, 123456789);
        benchmark::DoNotOptimize(out.data());
    }
}
BENCHMARK(BM_KeyStringEncode);

void BM_GenerateCompoundKeys(benchmark::State& state) {
    auto pattern = Doc::fromJsonOrDie(R"({"items.sku": 1, "ts": -1})");
    auto p = halo::store::parseKeyPattern(pattern.get()).getValue();
    std::vector<std::string> keys;
    for (auto _ : state) {
        keys.clear();
        bool multikey = false;
        benchmark::DoNotOptimize(
            halo::store::generateKeys(sampleDoc().get(), p, {}, &keys, &multikey));
    }
}
BENCHMARK(BM_GenerateCompoundKeys);

}  // namespace

BENCHMARK_MAIN();
