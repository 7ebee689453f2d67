#include "store/query/expression.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace halo::query {
namespace {

struct Case {
    const char* expr;      // JSON value
    const char* doc;       // $$ROOT
    const char* expected;  // JSON value (type-exact), or nullptr for "missing"
};

Value evalJson(const char* expr, const char* doc, const Variables* vars = nullptr,
               const ExpressionParseOptions& opts = {}) {
    auto wrapper = bson::Doc::fromJsonOrDie(std::string(R"({"e": )") + expr + "}");
    bson_iter_t it;
    bson::find(wrapper.get(), "e", &it);
    auto e = Expression::parse(*bson_iter_value(&it), opts);
    auto d = bson::Doc::fromJsonOrDie(doc);
    return e->evaluate(d.get(), vars);
}

std::string wrapValue(const Value& v) {
    bson::Doc out;
    if (!v.isMissing()) bson::appendValue(out.mut(), "r", v.get());
    return test::canonical(out.get());
}

void runTable(const std::vector<Case>& cases) {
    for (const auto& c : cases) {
        std::string expected =
            c.expected ? test::canonical((std::string(R"({"r": )") + c.expected + "}").c_str())
                       : "{ }";
        try {
            EXPECT_EQ(wrapValue(evalJson(c.expr, c.doc)), expected) << c.expr;
        } catch (const DBException& e) {
            ADD_FAILURE() << c.expr << " threw " << e.status().toString();
        }
    }
}

const char* kDoc = R"({"a": 5, "b": 2, "s": "Hello", "arr": [1, 2, 3], "n": null,
    "o": {"x": 1, "y": [{"z": 1}, {"z": 2}, {"w": 0}]}, "d": {"$date": "2021-03-04T05:06:07.089Z"}})";

TEST(ExpressionTest, FieldPathsAndLiterals) {
    runTable({
        {R"("$a")", kDoc, "5"},
        {R"("$o.x")", kDoc, "1"},
        {R"("$o.y.z")", kDoc, "[1, 2]"},
        {R"("$missing")", kDoc, nullptr},
        {R"("$a.b")", kDoc, nullptr},
        {R"("$$ROOT.a")", kDoc, "5"},
        {R"("$$CURRENT.b")", kDoc, "2"},
        {R"("plain")", kDoc, R"("plain")"},
        {R"({"$literal": "$a"})", kDoc, R"("$a")"},
        {R"({"k": "$a", "m": "$missing"})", kDoc, R"({"k": 5})"},
        {R"(["$a", "$missing"])", kDoc, "[5, null]"},
        {R"("$$REMOVE")", kDoc, nullptr},
        {R"({"$let": {"vars": {"x": "$a"}, "in": {"$add": ["$$x", 1]}}})", kDoc, "6"},
        {R"({"$let": {"vars": {"x": {"k": 1}}, "in": "$$x.k"}})", kDoc, "1"},
    });
}

TEST(ExpressionTest, GetSetUnsetFieldTakeFieldNamesLiterally) {
    const char* doc = R"({"a.b": 1, "a": {"b": 2}, "$p": 3, "o": {"k": 1, "j": 2}})";
    runTable({
        {R"({"$getField": "a.b"})", doc, "1"},
        {R"({"$getField": {"field": {"$literal": "$p"}}})", doc, "3"},
        {R"({"$getField": {"field": "k", "input": "$o"}})", doc, "1"},
        {R"({"$getField": {"field": "k", "input": "$missing"}})", doc, "null"},
        {R"({"$getField": "nope"})", doc, nullptr},
        {R"({"$setField": {"field": "k", "input": "$o", "value": 9}})", doc, R"({"k": 9, "j": 2})"},
        {R"({"$setField": {"field": {"$literal": "$x"}, "input": "$o", "value": 1}})", doc,
         R"({"k": 1, "j": 2, "$x": 1})"},
        {R"({"$setField": {"field": "k", "input": "$o", "value": "$$REMOVE"}})", doc,
         R"({"j": 2})"},
        {R"({"$unsetField": {"field": "j", "input": "$o"}})", doc, R"({"k": 1})"},
        {R"({"$unsetField": {"field": "j", "input": null}})", doc, "null"},
    });
    auto code = [&](const char* expr) {
        try {
            evalJson(expr, doc);
        } catch (const DBException& e) {
            return e.code();
        }
        return ErrorCode::OK;
    };
    EXPECT_EQ(
        static_cast<int>(code(R"({"$setField": {"field": "$o.k", "input": "$o", "value": 1}})")),
        4161106);
    EXPECT_EQ(static_cast<int>(code(R"({"$getField": {"field": "k", "input": 5}})")), 3041705);
    EXPECT_EQ(static_cast<int>(code(R"({"$getField": {"field": "k", "bad": 1}})")), 3041701);
}

TEST(ExpressionTest, RandIsAFreshDoubleInUnitInterval) {
    double first = -1;
    bool varied = false;
    for (int i = 0; i < 50; ++i) {
        Value v = evalJson(R"({"$rand": {}})", "{}");
        ASSERT_EQ(v.type(), BSON_TYPE_DOUBLE);
        double d = v.get().value.v_double;
        EXPECT_GE(d, 0.0);
        EXPECT_LT(d, 1.0);
        if (first >= 0 && d != first) varied = true;
        if (first < 0) first = d;
    }
    EXPECT_TRUE(varied);
    EXPECT_THROW(evalJson(R"({"$rand": {"a": 1}})", "{}"), DBException);
}

TEST(ExpressionTest, Arithmetic) {
    runTable({
        {R"({"$add": [1, 2]})", kDoc, "3"},
        {R"({"$add": [1, 2.5]})", kDoc, "3.5"},
        {R"({"$add": [2147483647, 1]})", kDoc, R"({"$numberLong": "2147483648"})"},
        {R"({"$add": [{"$numberLong": "9223372036854775807"}, 1]})", kDoc,
         "9.223372036854775808e18"},
        {R"({"$add": [{"$numberDecimal": "1.5"}, 1]})", kDoc, R"({"$numberDecimal": "2.5"})"},
        {R"({"$add": [1, null]})", kDoc, "null"},
        {R"({"$add": [1, "$missing"]})", kDoc, "null"},
        {R"({"$add": ["$d", 1000]})", kDoc, R"({"$date": "2021-03-04T05:06:08.089Z"})"},
        {R"({"$subtract": [5, 7]})", kDoc, "-2"},
        {R"({"$subtract": ["$d", {"$date": "2021-03-04T05:06:07Z"}]})", kDoc,
         R"({"$numberLong": "89"})"},
        {R"({"$multiply": [3, 4]})", kDoc, "12"},
        {R"({"$multiply": [65536, 65536]})", kDoc, R"({"$numberLong": "4294967296"})"},
        {R"({"$divide": [7, 2]})", kDoc, "3.5"},
        {R"({"$divide": [6, 3]})", kDoc, "2.0"},
        {R"({"$mod": [7, 3]})", kDoc, "1"},
        {R"({"$mod": [-7, 3]})", kDoc, "-1"},
        {R"({"$mod": [7.5, 2]})", kDoc, "1.5"},
        {R"({"$abs": -5})", kDoc, "5"},
        {R"({"$abs": -2147483648})", kDoc, R"({"$numberLong": "2147483648"})"},
        {R"({"$ceil": 1.2})", kDoc, "2.0"},
        {R"({"$floor": -1.2})", kDoc, "-2.0"},
        {R"({"$floor": 3})", kDoc, "3"},
        {R"({"$round": [2.5, 0]})", kDoc, "2.0"},
        {R"({"$round": [3.5]})", kDoc, "4.0"},
        {R"({"$round": [1234, -2]})", kDoc, "1200"},
        {R"({"$round": [1.2345, 2]})", kDoc, "1.23"},
        {R"({"$trunc": [-1.7]})", kDoc, "-1.0"},
        {R"({"$sqrt": 16})", kDoc, "4.0"},
        {R"({"$pow": [2, 10]})", kDoc, "1024"},
        {R"({"$pow": [2, -1]})", kDoc, "0.5"},
        {R"({"$pow": [2, 40]})", kDoc, R"({"$numberLong": "1099511627776"})"},
        {R"({"$exp": 0})", kDoc, "1.0"},
        {R"({"$ln": 1})", kDoc, "0.0"},
        {R"({"$log10": 1000})", kDoc, "3.0"},
    });
}

TEST(ExpressionTest, ComparisonAndLogic) {
    runTable({
        {R"({"$eq": ["$a", 5]})", kDoc, "true"},
        {R"({"$eq": [1, 1.0]})", kDoc, "true"},
        {R"({"$eq": ["$missing", null]})", kDoc, "false"},
        {R"({"$ne": ["$a", 5]})", kDoc, "false"},
        {R"({"$gt": ["$a", "$b"]})", kDoc, "true"},
        {R"({"$gt": ["a", 5]})", kDoc, "true"},
        {R"({"$lt": [null, 0]})", kDoc, "true"},
        {R"({"$lte": [5, 5]})", kDoc, "true"},
        {R"({"$gte": [4, 5]})", kDoc, "false"},
        {R"({"$cmp": ["$a", 7]})", kDoc, "-1"},
        {R"({"$and": [1, "$a", true]})", kDoc, "true"},
        {R"({"$and": [1, 0]})", kDoc, "false"},
        {R"({"$and": []})", kDoc, "true"},
        {R"({"$or": [0, null, "$missing"]})", kDoc, "false"},
        {R"({"$or": [0, "x"]})", kDoc, "true"},
        {R"({"$not": [0]})", kDoc, "true"},
        {R"({"$not": [[]]})", kDoc, "false"},
        {R"({"$cond": [{"$gt": ["$a", 1]}, "big", "small"]})", kDoc, R"("big")"},
        {R"({"$cond": {"if": "$n", "then": 1, "else": 2}})", kDoc, "2"},
        {R"({"$ifNull": ["$missing", "$n", "dflt"]})", kDoc, R"("dflt")"},
        {R"({"$ifNull": ["$a", "dflt"]})", kDoc, "5"},
        {R"({"$switch": {"branches": [{"case": {"$eq": ["$a", 1]}, "then": "one"},
                                       {"case": {"$eq": ["$a", 5]}, "then": "five"}], "default": "other"}})",
         kDoc, R"("five")"},
        {R"({"$switch": {"branches": [{"case": false, "then": 1}], "default": "d"}})", kDoc,
         R"("d")"},
    });
}

TEST(ExpressionTest, Strings) {
    runTable({
        {R"({"$concat": ["$s", " ", "World"]})", kDoc, R"("Hello World")"},
        {R"({"$concat": ["$s", "$missing"]})", kDoc, "null"},
        {R"({"$toLower": "$s"})", kDoc, R"("hello")"},
        {R"({"$toUpper": "$s"})", kDoc, R"("HELLO")"},
        {R"({"$toUpper": "$missing"})", kDoc, R"("")"},
        {R"({"$substr": ["$s", 1, 3]})", kDoc, R"("ell")"},
        {R"({"$substrBytes": ["$s", 3, -1]})", kDoc, R"("lo")"},
        {R"({"$substrCP": ["héllo", 1, 2]})", kDoc, R"("él")"},
        {R"({"$strLenBytes": "héllo"})", kDoc, "6"},
        {R"({"$strLenCP": "héllo"})", kDoc, "5"},
        {R"({"$split": ["a,b,,c", ","]})", kDoc, R"(["a", "b", "", "c"])"},
        {R"({"$trim": {"input": "  x y  "}})", kDoc, R"("x y")"},
        {R"({"$ltrim": {"input": "  x  "}})", kDoc, R"("x  ")"},
        {R"({"$rtrim": {"input": "xxaxx", "chars": "x"}})", kDoc, R"("xxa")"},
        {R"({"$indexOfBytes": ["$s", "l"]})", kDoc, "2"},
        {R"({"$indexOfBytes": ["$s", "z"]})", kDoc, "-1"},
        {R"({"$indexOfBytes": ["$s", "l", 3]})", kDoc, "3"},
        {R"({"$indexOfBytes": ["$missing", "l"]})", kDoc, "null"},
        {R"({"$strcasecmp": ["abc", "ABC"]})", kDoc, "0"},
    });
}

TEST(ExpressionTest, ArraysAndObjects) {
    runTable({
        {R"({"$in": [2, "$arr"]})", kDoc, "true"},
        {R"({"$in": [9, "$arr"]})", kDoc, "false"},
        {R"({"$size": "$arr"})", kDoc, "3"},
        {R"({"$arrayElemAt": ["$arr", 0]})", kDoc, "1"},
        {R"({"$arrayElemAt": ["$arr", -1]})", kDoc, "3"},
        {R"({"$arrayElemAt": ["$arr", 5]})", kDoc, nullptr},
        {R"({"$first": "$arr"})", kDoc, "1"},
        {R"({"$last": "$arr"})", kDoc, "3"},
        {R"({"$slice": ["$arr", 2]})", kDoc, "[1, 2]"},
        {R"({"$slice": ["$arr", -2]})", kDoc, "[2, 3]"},
        {R"({"$slice": ["$arr", 1, 1]})", kDoc, "[2]"},
        {R"({"$concatArrays": ["$arr", [4], []]})", kDoc, "[1, 2, 3, 4]"},
        {R"({"$concatArrays": ["$arr", "$missing"]})", kDoc, "null"},
        {R"({"$isArray": ["$arr"]})", kDoc, "true"},
        {R"({"$isArray": "$a"})", kDoc, "false"},
        {R"({"$filter": {"input": "$arr", "as": "x", "cond": {"$gt": ["$$x", 1]}}})", kDoc,
         "[2, 3]"},
        {R"({"$filter": {"input": "$arr", "cond": {"$gt": ["$$this", 1]}, "limit": 1}})", kDoc,
         "[2]"},
        {R"({"$map": {"input": "$arr", "as": "x", "in": {"$multiply": ["$$x", 10]}}})", kDoc,
         "[10, 20, 30]"},
        {R"({"$map": {"input": "$arr", "in": {"$add": ["$$this", "$a"]}}})", kDoc, "[6, 7, 8]"},
        {R"({"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}})",
         kDoc, "6"},
        {R"({"$reduce": {"input": ["a", "b"], "initialValue": "", "in": {"$concat": ["$$value", "$$this"]}}})",
         kDoc, R"("ab")"},
        {R"({"$map": {"input": "$missing", "in": 1}})", kDoc, "null"},
        {R"({"$mergeObjects": [{"a": 1, "b": 1}, {"b": 2}, null]})", kDoc, R"({"a": 1, "b": 2})"},
        {R"({"$objectToArray": "$o"})", kDoc,
         R"([{"k": "x", "v": 1}, {"k": "y", "v": [{"z": 1}, {"z": 2}, {"w": 0}]}])"},
        {R"({"$arrayToObject": [[["a", 1], ["b", 2]]]})", kDoc, R"({"a": 1, "b": 2})"},
        {R"({"$arrayToObject": [[{"k": "a", "v": 1}]]})", kDoc, R"({"a": 1})"},
        {R"({"$setUnion": [[3, 1], [1, 2]]})", kDoc, "[1, 2, 3]"},
        {R"({"$setIntersection": [[3, 1, 2], [2, 3, 4]]})", kDoc, "[2, 3]"},
        {R"({"$setDifference": [[3, 1, 2], [2]]})", kDoc, "[1, 3]"},
        {R"({"$setIsSubset": [[1], [1, 2]]})", kDoc, "true"},
        {R"({"$setEquals": [[1, 2], [2, 1, 1]]})", kDoc, "true"},
        {R"({"$allElementsTrue": [[1, true, "x"]]})", kDoc, "true"},
        {R"({"$allElementsTrue": [[1, 0]]})", kDoc, "false"},
        {R"({"$anyElementTrue": [[0, null, 2]]})", kDoc, "true"},
        {R"({"$sum": "$arr"})", kDoc, "6"},
        {R"({"$sum": [1, "x", 2.5]})", kDoc, "3.5"},
        {R"({"$sum": "$missing"})", kDoc, "0"},
        {R"({"$avg": "$arr"})", kDoc, "2.0"},
        {R"({"$avg": []})", kDoc, "null"},
        {R"({"$max": "$arr"})", kDoc, "3"},
        {R"({"$min": [5, null, 2]})", kDoc, "2"},
        {R"({"$max": ["a", 1]})", kDoc, R"("a")"},
        {R"({"$range": [0, 5, 2]})", kDoc, "[0, 2, 4]"},
        {R"({"$reverseArray": "$arr"})", kDoc, "[3, 2, 1]"},
        {R"({"$indexOfArray": ["$arr", 2]})", kDoc, "1"},
    });
}

TEST(ExpressionTest, TypesAndConversions) {
    runTable({
        {R"({"$type": "$a"})", kDoc, R"("int")"},
        {R"({"$type": "$missing"})", kDoc, R"("missing")"},
        {R"({"$type": "$o"})", kDoc, R"("object")"},
        {R"({"$toString": 1.5})", kDoc, R"("1.5")"},
        {R"({"$toString": 10})", kDoc, R"("10")"},
        {R"({"$toString": true})", kDoc, R"("true")"},
        {R"({"$toString": "$d"})", kDoc, R"("2021-03-04T05:06:07.089Z")"},
        {R"({"$toString": {"$oid": "507f1f77bcf86cd799439011"}})", kDoc,
         R"("507f1f77bcf86cd799439011")"},
        {R"({"$toInt": "42"})", kDoc, "42"},
        {R"({"$toInt": 4.9})", kDoc, "4"},
        {R"({"$toInt": true})", kDoc, "1"},
        {R"({"$toLong": "$d"})", kDoc, R"({"$numberLong": "1614834367089"})"},
        {R"({"$toDouble": "1.5"})", kDoc, "1.5"},
        {R"({"$toDecimal": 2})", kDoc, R"({"$numberDecimal": "2"})"},
        {R"({"$toBool": 0})", kDoc, "false"},
        {R"({"$toBool": ""})", kDoc, "true"},
        {R"({"$toObjectId": "507f1f77bcf86cd799439011"})", kDoc,
         R"({"$oid": "507f1f77bcf86cd799439011"})"},
        {R"({"$toDate": "2021-03-04T05:06:07.089Z"})", kDoc,
         R"({"$date": "2021-03-04T05:06:07.089Z"})"},
        {R"({"$toDate": "2021-03-04"})", kDoc, R"({"$date": "2021-03-04T00:00:00Z"})"},
        {R"({"$toDate": {"$numberLong": "0"}})", kDoc, R"({"$date": "1970-01-01T00:00:00Z"})"},
        {R"({"$toInt": null})", kDoc, "null"},
        {R"({"$convert": {"input": "abc", "to": "int", "onError": -1}})", kDoc, "-1"},
        {R"({"$convert": {"input": null, "to": "int", "onNull": 0}})", kDoc, "0"},
        {R"({"$convert": {"input": "7", "to": 18}})", kDoc, R"({"$numberLong": "7"})"},
    });
}

TEST(ExpressionTest, Dates) {
    runTable({
        {R"({"$year": "$d"})", kDoc, "2021"},
        {R"({"$month": "$d"})", kDoc, "3"},
        {R"({"$dayOfMonth": "$d"})", kDoc, "4"},
        {R"({"$hour": "$d"})", kDoc, "5"},
        {R"({"$minute": "$d"})", kDoc, "6"},
        {R"({"$second": "$d"})", kDoc, "7"},
        {R"({"$millisecond": "$d"})", kDoc, "89"},
        {R"({"$dayOfWeek": "$d"})", kDoc, "5"},
        {R"({"$dayOfYear": "$d"})", kDoc, "63"},
        {R"({"$hour": {"date": "$d", "timezone": "+02:00"}})", kDoc, "7"},
        {R"({"$year": "$missing"})", kDoc, "null"},
        {R"({"$dateToString": {"date": "$d"}})", kDoc, R"("2021-03-04T05:06:07.089Z")"},
        {R"({"$dateToString": {"date": "$d", "format": "%Y/%m/%d %H:%M:%S.%L %j %w %u %V %G %%"}})",
         kDoc, R"("2021/03/04 05:06:07.089 063 5 4 09 2021 %")"},
        {R"({"$dateToString": {"date": "$d", "format": "%H:%M %z", "timezone": "-0130"}})", kDoc,
         R"("03:36 -0130")"},
        {R"({"$dateToString": {"date": "$missing", "onNull": "none"}})", kDoc, R"("none")"},
        {R"({"$year": {"$date": "1969-12-31T23:59:59Z"}})", kDoc, "1969"},
    });
}

TEST(ExpressionTest, Variables) {
    Variables vars;
    vars.set("limit", Value::fromInt32(3));
    vars.setNow(1000);
    ExpressionParseOptions opts;
    opts.userVariables = {"limit"};
    EXPECT_EQ(wrapValue(evalJson(R"({"$add": ["$$limit", 1]})", "{}", &vars, opts)),
              test::canonical(R"({"r": 4})"));
    EXPECT_EQ(wrapValue(evalJson(R"("$$NOW")", "{}", &vars)),
              test::canonical(R"({"r": {"$date": "1970-01-01T00:00:01Z"}})"));
}

TEST(ExpressionTest, Errors) {
    struct ErrCase {
        const char* expr;
        int code;
        const char* message;  // exact when non-null
    };
    std::vector<ErrCase> cases = {
        {R"({"$foo": 1})", 168, "Unrecognized expression '$foo'"},
        {R"({"$abs": [1, 2]})", 16020,
         "Expression $abs takes exactly 1 arguments. 2 were passed in."},
        {R"({"$slice": [1]})", 28667, nullptr},
        {R"({"$add": [1, "x"]})", 16554, "$add only supports numeric or date types, not string"},
        {R"({"$multiply": [1, "x"]})", 16555, "$multiply only supports numeric types, not string"},
        {R"({"$divide": [1, 0]})", 16608, "can't $divide by zero"},
        {R"({"$mod": [1, 0]})", 16610, "can't $mod by zero"},
        {R"({"$subtract": ["x", 1]})", 16556, "cant $subtract a int from a string"},
        {R"({"$concat": ["a", 1]})", 16702, "$concat only supports strings, not int"},
        {R"({"$size": "$a"})", 17124,
         "The argument to $size must be an array. Type of the argument was: int"},
        {R"({"$size": "$missing"})", 17124, nullptr},
        {R"({"$in": [1, 2]})", 40081, "$in requires an array as a second argument, found: int"},
        {R"({"$arrayElemAt": [1, 0]})", 28689, nullptr},
        {R"({"$sqrt": -1})", 28714, nullptr},
        {R"({"$abs": "x"})", 28765, "$abs only supports numeric types, not string"},
        {R"("$$undefinedVar")", 17276, "Use of undefined variable: undefinedVar"},
        {R"("$")", 16872, nullptr},
        {R"({"$add": [1], "b": 2})", 15983, nullptr},
        {R"({"a.b": 1})", 16412, nullptr},
        {R"({"$cond": {"then": 1, "else": 2}})", 17080, "Missing 'if' parameter to $cond"},
        {R"({"$cond": {"if": 1, "then": 1, "else": 2, "x": 1}})", 17083,
         "Unrecognized parameter to $cond: x"},
        {R"({"$switch": {"branches": []}})", 40068, nullptr},
        {R"({"$switch": {"branches": [{"case": false, "then": 1}]}})", 40066, nullptr},
        {R"({"$map": {"input": 1, "in": 1}})", 16883, "input to $map must be an array not int"},
        {R"({"$filter": {"input": [], "cond": 1, "bogus": 1}})", 28647, nullptr},
        {R"({"$reduce": {"input": [], "in": 1}})", 40078, nullptr},
        {R"({"$let": {"vars": {"X": 1}, "in": 1}})", 16867, nullptr},
        {R"({"$toInt": "abc"})", 241, nullptr},
        {R"({"$toInt": 1e20})", 241, nullptr},
        {R"({"$toObjectId": "xyz"})", 241, nullptr},
        {R"({"$year": "x"})", 16006, "can't convert from BSON type string to Date"},
        {R"({"$dateToString": {"date": "$$NOW", "format": "%Q"}})", 18536, nullptr},
        {R"({"$split": ["a", ""]})", 40087, "$split requires a non-empty separator"},
        {R"({"$mergeObjects": [1]})", 40400, nullptr},
        {R"({"$objectToArray": 1})", 40390, nullptr},
        {R"({"$setUnion": [[1], 2]})", 17043, nullptr},
        {R"({"$strLenBytes": 1})", 34473, nullptr},
        {R"({"$ifNull": [1]})", 1257300, nullptr},
        {R"({"$pow": [0, -1]})", 28764, nullptr},
    };
    for (const auto& c : cases) {
        try {
            Value v = evalJson(c.expr, kDoc);
            ADD_FAILURE() << c.expr << " returned " << v.toString();
        } catch (const DBException& e) {
            EXPECT_EQ(e.status().codeNumber(), c.code) << c.expr << ": " << e.status().reason();
            if (c.message) {
                EXPECT_EQ(e.status().reason(), c.message) << c.expr;
            }
        }
    }
}

}  // namespace
}  // namespace halo::query
