#include "store/query/collator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bson/compare.h"
#include "bson/doc.h"
#include "store/query/matcher.h"
#include "store/query/sort.h"
#include "test_util.h"

namespace halo::query {
namespace {

using bson::Doc;

CollatorPtr make(const char* json) {
    auto spec = Doc::fromJsonOrDie(json);
    auto sw = Collator::parse(spec.get());
    EXPECT_TRUE(sw.isOK()) << json << ": " << sw.getStatus().reason();
    return sw.isOK() ? sw.getValue() : nullptr;
}

Status parseError(const char* json) {
    auto spec = Doc::fromJsonOrDie(json);
    auto sw = Collator::parse(spec.get());
    EXPECT_FALSE(sw.isOK()) << json;
    return sw.getStatus();
}

int sign(int c) {
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

TEST(Collator, SimpleLocaleIsNull) {
    auto spec = Doc::fromJsonOrDie(R"({"locale": "simple"})");
    auto sw = Collator::parse(spec.get());
    ASSERT_TRUE(sw.isOK());
    EXPECT_EQ(sw.getValue(), nullptr);
    EXPECT_TRUE(isSimpleCollationSpec(spec.get()));
}

TEST(Collator, NormalizedSpecFillsEveryField) {
    auto c = make(R"({"locale": "en_US", "strength": 2})");
    ASSERT_TRUE(c);
    EXPECT_EQ(test::canonical(c->toDoc().get()),
              test::canonical(R"({"locale": "en_US", "caseLevel": false, "caseFirst": "off",
                  "strength": {"$numberInt": "2"}, "numericOrdering": false,
                  "alternate": "non-ignorable", "maxVariable": "punct", "normalization": false,
                  "backwards": false, "version": "57.1"})"));
    // Locale defaults come from ICU: Canadian French sorts accents backwards,
    // Danish puts upper case first.
    EXPECT_TRUE(make(R"({"locale": "fr_CA"})")->spec().backwards);
    EXPECT_EQ(make(R"({"locale": "da"})")->spec().caseFirst, "upper");
    // A normalized spec parses back to the same collation.
    auto again = Collator::parse(c->toDoc().get());
    ASSERT_TRUE(again.isOK());
    EXPECT_TRUE(sameCollation(c.get(), again.getValue().get()));
    EXPECT_FALSE(sameCollation(c.get(), make(R"({"locale": "en_US"})").get()));
    EXPECT_TRUE(sameCollation(nullptr, nullptr));
    EXPECT_FALSE(sameCollation(c.get(), nullptr));
}

TEST(Collator, ValidationErrorsAreMongods) {
    Status s = parseError(R"({"locale": "xx"})");
    EXPECT_EQ(s.code(), ErrorCode::BadValue);
    EXPECT_EQ(s.reason(), R"(Field 'locale' is invalid in: { locale: "xx" })");
    s = parseError(R"({"locale": "en_XX"})");
    EXPECT_EQ(s.reason(),
              R"(Field 'locale' is invalid in: { locale: "en_XX" }. Did you mean 'en'?)");
    EXPECT_EQ(parseError(R"({"locale": ""})").code(), ErrorCode::BadValue);
    EXPECT_EQ(parseError(R"({"strength": 1})").code(), ErrorCode::NoSuchKey);
    EXPECT_EQ(parseError(R"({"locale": 5})").code(), ErrorCode::TypeMismatch);
    s = parseError(R"({"locale": "en", "strength": 0})");
    EXPECT_EQ(s.code(), ErrorCode::FailedToParse);
    EXPECT_EQ(s.reason(), "Field 'strength' must be an integer 1 through 5. Got: 0");
    EXPECT_EQ(parseError(R"({"locale": "en", "strength": 1.5})").code(), ErrorCode::BadValue);
    EXPECT_EQ(parseError(R"({"locale": "en", "strength": "2"})").code(), ErrorCode::TypeMismatch);
    EXPECT_EQ(parseError(R"({"locale": "en", "caseLevel": 1})").code(), ErrorCode::TypeMismatch);
    EXPECT_EQ(parseError(R"({"locale": "en", "caseFirst": "x"})").code(), ErrorCode::FailedToParse);
    EXPECT_EQ(parseError(R"({"locale": "en", "alternate": "x"})").code(), ErrorCode::FailedToParse);
    EXPECT_EQ(parseError(R"({"locale": "en", "maxVariable": "x"})").code(),
              ErrorCode::FailedToParse);
    s = parseError(R"({"locale": "en", "foo": 1})");
    EXPECT_EQ(s.code(), ErrorCode::FailedToParse);
    EXPECT_EQ(s.reason(),
              R"(Collation spec contains unknown field. Collation spec: { locale: "en", foo: 1 })");
    EXPECT_EQ(parseError(R"({"locale": "simple", "strength": 1})").code(),
              ErrorCode::FailedToParse);
    EXPECT_EQ(parseError(R"({"locale": "en", "strength": 1, "backwards": true})").code(),
              ErrorCode::BadValue);
    EXPECT_EQ(parseError(R"({"locale": "en", "strength": 2, "caseFirst": "lower"})").code(),
              ErrorCode::BadValue);
    EXPECT_TRUE(
        make(R"({"locale": "en", "strength": 2, "caseFirst": "lower", "caseLevel": true})"));
    EXPECT_EQ(parseError(R"({"locale": "en", "version": "72.1"})").code(),
              ErrorCode::IncompatibleCollationVersion);
    EXPECT_TRUE(make(R"({"locale": "en", "version": "57.1"})"));
}

TEST(Collator, CompareFollowsTheOptions) {
    auto ci = make(R"({"locale": "en", "strength": 2})");
    EXPECT_EQ(ci->compare("abc", "ABC"), 0);
    EXPECT_LT(ci->compare("abc", "abd"), 0);
    EXPECT_NE(ci->compare("a", "á"), 0);
    auto primary = make(R"({"locale": "en", "strength": 1})");
    EXPECT_EQ(primary->compare("a", "Á"), 0);
    auto num = make(R"({"locale": "en", "numericOrdering": true})");
    EXPECT_LT(num->compare("9", "10"), 0);
    EXPECT_GT(make(R"({"locale": "en"})")->compare("9", "10"), 0);
    auto upper = make(R"({"locale": "en", "caseFirst": "upper"})");
    EXPECT_LT(upper->compare("A", "a"), 0);
    EXPECT_GT(make(R"({"locale": "en", "caseFirst": "lower"})")->compare("A", "a"), 0);
    auto shifted = make(R"({"locale": "en", "alternate": "shifted"})");
    EXPECT_EQ(shifted->compare("a-b", "ab"), 0);
    EXPECT_EQ(shifted->compare("a b", "ab"), 0);
    auto space = make(R"({"locale": "en", "alternate": "shifted", "maxVariable": "space"})");
    EXPECT_EQ(space->compare("a b", "ab"), 0);
    EXPECT_NE(space->compare("a-b", "ab"), 0);
    auto fr = make(R"({"locale": "fr", "backwards": true})");
    EXPECT_LT(fr->compare("côte", "coté"), 0);
    EXPECT_GT(make(R"({"locale": "fr"})")->compare("côte", "coté"), 0);
    auto caseLevel = make(R"({"locale": "en", "strength": 1, "caseLevel": true})");
    EXPECT_NE(caseLevel->compare("a", "A"), 0);
    EXPECT_EQ(caseLevel->compare("a", "á"), 0);
}

TEST(Collator, ComparisonKeysOrderAsCompare) {
    std::vector<std::string> words = {"a",    "A",    "á",  "b",      "B",      "10",
                                      "9",    "",     "ab", "a b",    "aB",     "côte",
                                      "coté", "zeta", "Ω",  "\u00e9", "e\u0301"};
    for (const char* spec : {R"({"locale": "en"})", R"({"locale": "en", "strength": 2})",
                             R"({"locale": "en", "numericOrdering": true, "caseFirst": "upper"})",
                             R"({"locale": "fr", "backwards": true, "alternate": "shifted"})",
                             R"({"locale": "de", "strength": 5})"}) {
        auto c = make(spec);
        for (const auto& a : words) {
            std::string ka = c->comparisonKey(a);
            EXPECT_EQ(ka.find('\0'), std::string::npos);
            for (const auto& b : words) {
                EXPECT_EQ(sign(ka.compare(c->comparisonKey(b))), sign(c->compare(a, b)))
                    << spec << " " << a << " vs " << b;
            }
        }
    }
}

TEST(Collator, CompareValuesRecursesIntoDocumentsAndArrays) {
    auto ci = make(R"({"locale": "en", "strength": 2})");
    auto a = Doc::fromJsonOrDie(R"({"v": {"name": "Bob", "tags": ["X", "y"]}})");
    auto b = Doc::fromJsonOrDie(R"({"v": {"name": "bob", "tags": ["x", "Y"]}})");
    bson_iter_t ia, ib;
    bson_iter_init_find(&ia, a.get(), "v");
    bson_iter_init_find(&ib, b.get(), "v");
    EXPECT_NE(bson::compareValues(*bson_iter_value(&ia), *bson_iter_value(&ib)), 0);
    EXPECT_EQ(bson::compareValues(*bson_iter_value(&ia), *bson_iter_value(&ib), ci.get()), 0);
    // Field names still compare bytewise.
    auto c = Doc::fromJsonOrDie(R"({"v": {"Name": "Bob"}})");
    auto d = Doc::fromJsonOrDie(R"({"v": {"name": "Bob"}})");
    EXPECT_NE(bson::compareDocs(c.get(), d.get(), ci.get()), 0);
}

TEST(Collator, MatcherAndSortUseTheCollation) {
    auto ci = make(R"({"locale": "en", "strength": 2})");
    MatcherParseOptions o;
    o.collator = ci;
    auto filter = Doc::fromJsonOrDie(R"({"a": {"$in": ["X", "z"]}, "b": {"$lt": "M"}})");
    auto m = Matcher::parse(filter.get(), o);
    ASSERT_TRUE(m.isOK());
    EXPECT_TRUE(m.getValue()->matches(Doc::fromJsonOrDie(R"({"a": "x", "b": "k"})").get()));
    EXPECT_FALSE(m.getValue()->matches(Doc::fromJsonOrDie(R"({"a": "x", "b": "n"})").get()));
    auto binary = Matcher::parse(filter.get());
    EXPECT_FALSE(binary.getValue()->matches(Doc::fromJsonOrDie(R"({"a": "x", "b": "k"})").get()));

    auto expr = Doc::fromJsonOrDie(R"({"$expr": {"$eq": ["$a", "HELLO"]}})");
    auto me = Matcher::parse(expr.get(), o);
    ASSERT_TRUE(me.isOK());
    EXPECT_TRUE(me.getValue()->matches(Doc::fromJsonOrDie(R"({"a": "hello"})").get()));

    auto num = make(R"({"locale": "en", "numericOrdering": true})");
    auto spec = Doc::fromJsonOrDie(R"({"s": 1})");
    auto sp = SortPattern::parse(spec.get(), num);
    ASSERT_TRUE(sp.isOK());
    auto d9 = Doc::fromJsonOrDie(R"({"s": "9"})");
    auto d10 = Doc::fromJsonOrDie(R"({"s": "10"})");
    EXPECT_LT(sp.getValue().compare(d9.get(), d10.get()), 0);
    EXPECT_GT(SortPattern::parse(spec.get()).getValue().compare(d9.get(), d10.get()), 0);
    // An array sorts by its smallest element under the collation.
    auto arr = Doc::fromJsonOrDie(R"({"s": ["10", "2"]})");
    auto d3 = Doc::fromJsonOrDie(R"({"s": "3"})");
    EXPECT_LT(sp.getValue().compare(arr.get(), d3.get()), 0);
}

}  // namespace
}  // namespace halo::query
