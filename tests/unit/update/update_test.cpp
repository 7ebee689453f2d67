// Table-driven tests of halo_update: {old document, update, expected document or
// error code (+ message)}. JSON literals use single quotes for readability.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "bson/doc.h"
#include "store/update/update_driver.h"

namespace halo::update {
namespace {

std::string dq(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c == '\'') c = '"';
    }
    return out;
}

bson::Doc J(std::string_view json) {
    return bson::Doc::fromJsonOrDie(dq(json));
}

std::string canonical(const bson_t* b) {
    size_t len;
    char* s = bson_as_canonical_extended_json(b, &len);
    std::string out(s, len);
    bson_free(s);
    return out;
}

struct Case {
    const char* doc;
    const char* update;
    const char* expected;  // null when an error is expected
    int code = 0;
    const char* message = nullptr;  // exact errmsg, when given
    bool modified = true;
    const char* arrayFilters = nullptr;
    const char* positional = nullptr;
};

void runCase(const Case& c) {
    SCOPED_TRACE(std::string("doc=") + c.doc + " update=" + c.update);
    auto upd = J(c.update);
    std::optional<bson::Doc> filters;
    if (c.arrayFilters) filters = J(c.arrayFilters);
    auto parsed = UpdateDriver::parse(upd.get(), filters ? filters->get() : nullptr);
    Status st = parsed.getStatus();
    std::optional<UpdateResult> result;
    if (parsed.isOK()) {
        ApplyOptions opts;
        if (c.positional) opts.positionalIndex = c.positional;
        opts.nowMillis = 1700000000123;
        auto doc = J(c.doc);
        auto r = parsed.getValue()->tryApply(doc.get(), opts);
        st = r.getStatus();
        if (r.isOK()) result = std::move(r.getValue());
    }
    if (!c.expected) {
        ASSERT_FALSE(st.isOK()) << "expected error " << c.code << ", got "
                                << (result ? result->newDoc.toJson() : "");
        EXPECT_EQ(st.codeNumber(), c.code) << st.reason();
        if (c.message) {
            EXPECT_EQ(st.reason(), c.message);
        }
        return;
    }
    ASSERT_TRUE(st.isOK()) << st.toString();
    EXPECT_EQ(canonical(result->newDoc.get()), canonical(J(c.expected).get()));
    EXPECT_EQ(result->modified, c.modified);
}

class UpdateTable : public testing::TestWithParam<Case> {};
TEST_P(UpdateTable, Applies) {
    runCase(GetParam());
}

// ---------------------------------------------------------------- $set / $unset
INSTANTIATE_TEST_SUITE_P(
    Set, UpdateTable,
    testing::Values(
        Case{"{'_id': 1, 'a': 1}", "{'$set': {'a': 2}}", "{'_id': 1, 'a': 2}"},
        Case{"{'_id': 1, 'a': 1}", "{'$set': {'a': 1}}", "{'_id': 1, 'a': 1}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 1}", "{'$set': {'a': 1.0}}", "{'_id': 1, 'a': 1.0}"},
        Case{"{'_id': 1}", "{'$set': {'a.b.c': 1}}", "{'_id': 1, 'a': {'b': {'c': 1}}}"},
        Case{"{'_id': 1, 'z': 0}", "{'$set': {'c': 1, 'b': 2, 'a': 3}}",
             "{'_id': 1, 'z': 0, 'a': 3, 'b': 2, 'c': 1}"},
        Case{"{'_id': 1, 'a': {'x': 1}}", "{'$set': {'a.y': 2, 'a.b': 3}}",
             "{'_id': 1, 'a': {'x': 1, 'b': 3, 'y': 2}}"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$set': {'a.4': 5}}",
             "{'_id': 1, 'a': [1, 2, null, null, 5]}"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$set': {'a.1': 9}}", "{'_id': 1, 'a': [1, 9]}"},
        Case{"{'_id': 1, 'a': [{'b': 1}]}", "{'$set': {'a.0.c': 2}}",
             "{'_id': 1, 'a': [{'b': 1, 'c': 2}]}"},
        Case{"{'_id': 1, 'a': {'0': 1}}", "{'$set': {'a.0': 2}}", "{'_id': 1, 'a': {'0': 2}}"},
        Case{"{'_id': 1, 'a': [1]}", "{'$set': {'a.10': 1, 'a.9': 2}}",
             "{'_id': 1, 'a': [1, null, null, null, null, null, null, null, null, 2, 1]}"},
        Case{"{'_id': 1}", "{'$set': {'a': {'$x': 1, 'b.c': 2}}}",
             "{'_id': 1, 'a': {'$x': 1, 'b.c': 2}}"},
        Case{"{'_id': 1, 'a': 1}", "{'$set': {'a.b': 1}}", nullptr, 28,
             "Cannot create field 'b' in element {a: 1}"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$set': {'a.b': 1}}", nullptr, 28,
             "Cannot create field 'b' in element {a: [ 1, 2 ]}"},
        Case{"{'_id': 1}", "{'$set': {'': 1}}", nullptr, 56, "An empty update path is not valid."},
        Case{"{'_id': 1}", "{'$set': {'a..b': 1}}", nullptr, 56,
             "The update path 'a..b' contains an empty field name, which is not allowed."},
        Case{"{'_id': 1}", "{'$set': {'$foo': 1}}", nullptr, 52,
             "The dollar ($) prefixed field '$foo' in '$foo' is not allowed in the context of an "
             "update's replacement document. Consider using an aggregation pipeline with "
             "$replaceWith."},
        Case{"{'_id': 1}", "{'$set': {}}", "{'_id': 1}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 1}", "{'$set': {'_id': 1}}", "{'_id': 1, 'a': 1}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 1}", "{'$set': {'_id': 2}}", nullptr, 66,
             "Performing an update on the path '_id' would modify the immutable field '_id'"},
        Case{"{'_id': {'x': 1}}", "{'$set': {'_id.x': 2}}", nullptr, 66,
             "Performing an update on the path '_id.x' would modify the immutable field '_id'"},
        Case{"{'_id': 1, 'a': 1, 'b': 2}", "{'$unset': {'a': ''}}", "{'_id': 1, 'b': 2}"},
        Case{"{'_id': 1, 'a': 1}", "{'$unset': {'x': 1, 'a.b': 1}}", "{'_id': 1, 'a': 1}", 0,
             nullptr, false},
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$unset': {'a.1': 1}}",
             "{'_id': 1, 'a': [1, null, 3]}"},
        Case{"{'_id': 1, 'a': {'b': 1, 'c': 2}}", "{'$unset': {'a.b': 1}}",
             "{'_id': 1, 'a': {'c': 2}}"},
        Case{"{'_id': 1}", "{'$unset': {'_id': 1}}", nullptr, 66},
        Case{"{'_id': 1}", "{'$setOnInsert': {'a': 1}}", "{'_id': 1}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 5}", "{'$set': {'_id': [1]}}", nullptr, 66}));

// ------------------------------------------------------------ parse errors
INSTANTIATE_TEST_SUITE_P(
    Parse, UpdateTable,
    testing::Values(
        Case{"{'_id': 1}", "{'$foo': {'a': 1}}", nullptr, 9,
             "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update "
             "specified as an array"},
        Case{"{'_id': 1}", "{'$set': {'a': 1}, 'b': 2}", nullptr, 9,
             "Unknown modifier: b. Expected a valid update modifier or pipeline-style update "
             "specified as an array"},
        Case{"{'_id': 1}", "{'$set': 5}", nullptr, 9,
             "Modifiers operate on fields but we found type int instead. For example: {$mod: "
             "{<field>: ...}} not {$set: 5}"},
        Case{"{'_id': 1}", "{'$set': {'a': 1, 'a.b': 2}}", nullptr, 40,
             "Updating the path 'a.b' would create a conflict at 'a'"},
        Case{"{'_id': 1}", "{'$set': {'a.b': 1}, '$inc': {'a': 2}}", nullptr, 40,
             "Updating the path 'a' would create a conflict at 'a'"},
        Case{"{'_id': 1}", "{'$set': {'a': 1}, '$inc': {'a': 2}}", nullptr, 40,
             "Updating the path 'a' would create a conflict at 'a'"},
        Case{"{'_id': 1}", "{'$set': {'a.$[]': 1, 'a.b': 2}}", nullptr, 40,
             "Updating the path 'a.b' would create a conflict at 'a'"},
        Case{"{'_id': 1}", "{'$inc': {'a': 'x'}}", nullptr, 14,
             "Cannot increment with non-numeric argument: {a: \"x\"}"},
        Case{"{'_id': 1}", "{'$mul': {'a': null}}", nullptr, 14,
             "Cannot multiply with non-numeric argument: {a: null}"},
        Case{"{'_id': 1}", "{'$set': {'$.a': 1}}", nullptr, 2,
             "Cannot have positional (i.e. '$') element in the first position in path '$.a'"},
        Case{"{'_id': 1}", "{'$set': {'a.$.b.$': 1}}", nullptr, 2,
             "Too many positional (i.e. '$') elements found in path 'a.$.b.$'"},
        Case{"{'_id': 1}", "{'$set': {'a.$[x]': 1}}", nullptr, 2,
             "No array filter found for identifier 'x' in path 'a.$[x]'"},
        Case{"{'_id': 1}", "{'$set': {'a': 1}}", nullptr, 9,
             "The array filter for identifier 'x' was not used in the update { $set: { a: 1 } }",
             true, "[{'x': 1}]"},
        Case{"{'_id': 1}", "{'$set': {'a.$[x]': 1}}", nullptr, 9,
             "Found multiple array filters with the same top-level field name x", true,
             "[{'x': 1}, {'x': 2}]"},
        Case{"{'_id': 1}", "{'$set': {'a.$[x]': 1}}", nullptr, 9,
             "Error parsing array filter :: caused by :: Expected a single top-level field name, "
             "found 'x' and 'y'",
             true, "[{'x': 1, 'y': 2}]"},
        Case{"{'_id': 1}", "{'$set': {'a.$[X]': 1}}", nullptr, 2, nullptr, true, "[{'X': 1}]"},
        Case{"{'_id': 1}", "{'$set': {'a.$[x]': 1}}", nullptr, 9,
             "Cannot use an expression without a top-level field name in arrayFilters", true,
             "[{}]"},
        Case{"{'_id': 1}", "{'$rename': {'a': 1}}", nullptr, 2,
             "The 'to' field for $rename must be a string: a: 1"},
        Case{"{'_id': 1}", "{'$rename': {'a': 'a'}}", nullptr, 2,
             "The source and target field for $rename must differ: a: \"a\""},
        Case{"{'_id': 1}", "{'$rename': {'a': 'a.b'}}", nullptr, 2,
             "The source and target field for $rename must not be on the same path: a: \"a.b\""},
        Case{"{'_id': 1}", "{'$rename': {'a.$': 'b'}}", nullptr, 2,
             "The source field for $rename may not be dynamic: a.$"},
        Case{"{'_id': 1}", "{'$rename': {'a': 'b.$[]'}}", nullptr, 2,
             "The destination field for $rename may not be dynamic: b.$[]"},
        Case{"{'_id': 1}", "{'$rename': {'a': 'b'}, '$set': {'b.c': 1}}", nullptr, 40},
        Case{"{'_id': 1}", "{'$pop': {'a': 2}}", nullptr, 9, "$pop expects 1 or -1, found: 2"},
        Case{"{'_id': 1}", "{'$pop': {'a': 2.0}}", nullptr, 9, "$pop expects 1 or -1, found: 2"},
        Case{"{'_id': 1}", "{'$pop': {'a': 1.5}}", nullptr, 9, "Expected an integer: a: 1.5"},
        Case{"{'_id': 1}", "{'$pop': {'a': 'x'}}", nullptr, 9, "Expected a number in: a: \"x\""},
        Case{"{'_id': 1}", "{'$pullAll': {'a': 1}}", nullptr, 2,
             "$pullAll requires an array argument but was given a int"},
        Case{"{'_id': 1}", "{'$push': {'a': {'$each': 1}}}", nullptr, 2,
             "The argument to $each in $push must be an array but it was of type: int"},
        Case{"{'_id': 1}", "{'$push': {'a': {'$each': [], '$foo': 1}}}", nullptr, 2,
             "Unrecognized clause in $push: $foo"},
        Case{"{'_id': 1}", "{'$push': {'a': {'$each': [], '$slice': 'x'}}}", nullptr, 2},
        Case{"{'_id': 1}", "{'$push': {'a': {'$each': [], '$sort': 2}}}", nullptr, 2},
        Case{"{'_id': 1}", "{'$push': {'a': {'$each': [], '$sort': {}}}}", nullptr, 2,
             "The $sort pattern is empty when it should be a set of fields."},
        Case{"{'_id': 1}", "{'$addToSet': {'a': {'$each': 1}}}", nullptr, 14,
             "The argument to $each in $addToSet must be an array but it was of type int"},
        Case{"{'_id': 1}", "{'$currentDate': {'a': 1}}", nullptr, 2},
        Case{"{'_id': 1}", "{'$currentDate': {'a': {'$type': 'x'}}}", nullptr, 2},
        Case{"{'_id': 1}", "{'$bit': {'a': {'nand': 1}}}", nullptr, 2},
        Case{"{'_id': 1}", "{'$bit': {'a': {'and': 1.5}}}", nullptr, 2}));

// --------------------------------------------------------------- arithmetic
INSTANTIATE_TEST_SUITE_P(
    Arithmetic, UpdateTable,
    testing::Values(
        Case{"{'_id': 1, 'a': 1}", "{'$inc': {'a': 2}}", "{'_id': 1, 'a': 3}"},
        Case{"{'_id': 1, 'a': 1}", "{'$inc': {'a': 0}}", "{'_id': 1, 'a': 1}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 1}", "{'$inc': {'a': 0.5}}", "{'_id': 1, 'a': 1.5}"},
        Case{"{'_id': 1}", "{'$inc': {'a.b': 5}}", "{'_id': 1, 'a': {'b': 5}}"},
        Case{"{'_id': 1, 'a': 2147483647}", "{'$inc': {'a': 1}}",
             "{'_id': 1, 'a': {'$numberLong': '2147483648'}}"},
        Case{"{'_id': 1, 'a': {'$numberLong': '9223372036854775807'}}", "{'$inc': {'a': 1}}",
             nullptr, 2,
             "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) "
             "for document {_id: 1}"},
        Case{"{'_id': 1, 'a': 'x'}", "{'$inc': {'a': 1}}", nullptr, 14,
             "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of "
             "non-numeric type string"},
        Case{"{'_id': 1, 'a': 3}", "{'$mul': {'a': 4}}", "{'_id': 1, 'a': 12}"},
        Case{"{'_id': 1}", "{'$mul': {'a': 4}}", "{'_id': 1, 'a': 0}"},
        Case{"{'_id': 1}", "{'$mul': {'a': {'$numberLong': '4'}}}",
             "{'_id': 1, 'a': {'$numberLong': '0'}}"},
        Case{"{'_id': 1}", "{'$mul': {'a': 2.5}}", "{'_id': 1, 'a': 0.0}"},
        Case{"{'_id': 1, 'a': 5}", "{'$min': {'a': 3}}", "{'_id': 1, 'a': 3}"},
        Case{"{'_id': 1, 'a': 5}", "{'$min': {'a': 7}}", "{'_id': 1, 'a': 5}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 5}", "{'$max': {'a': 5.0}}", "{'_id': 1, 'a': 5}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 5}", "{'$max': {'a': 'x'}}", "{'_id': 1, 'a': 'x'}"},
        Case{"{'_id': 1}", "{'$max': {'a': 1}}", "{'_id': 1, 'a': 1}"},
        Case{"{'_id': 1, 'a': 12}", "{'$bit': {'a': {'and': 10}}}", "{'_id': 1, 'a': 8}"},
        Case{"{'_id': 1, 'a': 12}", "{'$bit': {'a': {'or': 3, 'xor': 1}}}", "{'_id': 1, 'a': 14}"},
        Case{"{'_id': 1, 'a': 1}", "{'$bit': {'a': {'or': {'$numberLong': '2'}}}}",
             "{'_id': 1, 'a': {'$numberLong': '3'}}"},
        Case{"{'_id': 1}", "{'$bit': {'a': {'or': 5}}}", "{'_id': 1, 'a': 5}"}));

// ------------------------------------------------------- $rename / $currentDate
INSTANTIATE_TEST_SUITE_P(
    Rename, UpdateTable,
    testing::Values(
        Case{"{'_id': 1, 'a': 1, 'b': 2}", "{'$rename': {'a': 'c'}}", "{'_id': 1, 'b': 2, 'c': 1}"},
        Case{"{'_id': 1, 'a': 1, 'b': 2}", "{'$rename': {'a': 'b'}}", "{'_id': 1, 'b': 1}"},
        Case{"{'_id': 1, 'b': 2}", "{'$rename': {'a': 'c'}}", "{'_id': 1, 'b': 2}", 0, nullptr,
             false},
        Case{"{'_id': 1, 'a': {'x': 1}}", "{'$rename': {'a.x': 'b.y'}}",
             "{'_id': 1, 'a': {}, 'b': {'y': 1}}"},
        Case{"{'_id': 1, 'a': [1]}", "{'$rename': {'a.0': 'b'}}", nullptr, 2,
             "The source field cannot be an array element, 'a.0' in doc with _id: 1 has an array "
             "field called 'a'"},
        Case{"{'_id': 1, 'a': 1, 'b': [1]}", "{'$rename': {'a': 'b.0'}}", nullptr, 2,
             "The destination field cannot be an array element, 'b.0' in doc with _id: 1 has an "
             "array field called 'b'"},
        Case{"{'_id': 1, 'a': 1}", "{'$rename': {'_id': 'x'}}", nullptr, 66},
        Case{"{'_id': 1}", "{'$currentDate': {'a': true}}",
             "{'_id': 1, 'a': {'$date': {'$numberLong': '1700000000123'}}}"},
        Case{"{'_id': 1}", "{'$currentDate': {'a': {'$type': 'timestamp'}}}",
             "{'_id': 1, 'a': {'$timestamp': {'t': 1700000000, 'i': 1}}}"}));

// ----------------------------------------------------------- array operators
INSTANTIATE_TEST_SUITE_P(
    Arrays, UpdateTable,
    testing::Values(
        Case{"{'_id': 1, 'a': [1]}", "{'$push': {'a': 2}}", "{'_id': 1, 'a': [1, 2]}"},
        Case{"{'_id': 1}", "{'$push': {'a': 2}}", "{'_id': 1, 'a': [2]}"},
        Case{"{'_id': 1, 'a': [1]}", "{'$push': {'a': [2, 3]}}", "{'_id': 1, 'a': [1, [2, 3]]}"},
        Case{"{'_id': 1, 'a': 1}", "{'$push': {'a': 2}}", nullptr, 2,
             "The field 'a' must be an array but is of type int in document {_id: 1}"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$push': {'a': {'$each': [3, 4], '$position': 1}}}",
             "{'_id': 1, 'a': [1, 3, 4, 2]}"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$push': {'a': {'$each': [3], '$position': -1}}}",
             "{'_id': 1, 'a': [1, 3, 2]}"},
        Case{"{'_id': 1, 'a': [5, 1]}", "{'$push': {'a': {'$each': [3], '$sort': 1}}}",
             "{'_id': 1, 'a': [1, 3, 5]}"},
        Case{"{'_id': 1, 'a': [5, 1]}",
             "{'$push': {'a': {'$each': [3], '$sort': -1, '$slice': 2}}}",
             "{'_id': 1, 'a': [5, 3]}"},
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$push': {'a': {'$each': [4], '$slice': -2}}}",
             "{'_id': 1, 'a': [3, 4]}"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$push': {'a': {'$each': [], '$slice': 0}}}",
             "{'_id': 1, 'a': []}"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$push': {'a': {'$each': []}}}",
             "{'_id': 1, 'a': [1, 2]}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': [{'s': 3}, {'s': 1}]}",
             "{'$push': {'a': {'$each': [{'s': 2}], '$sort': {'s': 1}}}}",
             "{'_id': 1, 'a': [{'s': 1}, {'s': 2}, {'s': 3}]}"},
        Case{"{'_id': 1, 'a': [{'s': {'t': 1}}, {'s': {'t': 2}}]}",
             "{'$push': {'a': {'$each': [], '$sort': {'s.t': -1}}}}",
             "{'_id': 1, 'a': [{'s': {'t': 2}}, {'s': {'t': 1}}]}"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$addToSet': {'a': 2}}", "{'_id': 1, 'a': [1, 2]}", 0,
             nullptr, false},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$addToSet': {'a': {'$each': [2, 3, 3, 4]}}}",
             "{'_id': 1, 'a': [1, 2, 3, 4]}"},
        Case{"{'_id': 1, 'a': [1]}", "{'$addToSet': {'a': 1.0}}", "{'_id': 1, 'a': [1]}", 0,
             nullptr, false},
        Case{"{'_id': 1}", "{'$addToSet': {'a': {'$each': [1, 1]}}}", "{'_id': 1, 'a': [1]}"},
        Case{"{'_id': 1, 'a': 1}", "{'$addToSet': {'a': 1}}", nullptr, 2,
             "Cannot apply $addToSet to non-array field. Field named 'a' has non-array type int"},
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$pop': {'a': 1}}", "{'_id': 1, 'a': [1, 2]}"},
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$pop': {'a': -1}}", "{'_id': 1, 'a': [2, 3]}"},
        Case{"{'_id': 1, 'a': []}", "{'$pop': {'a': 1}}", "{'_id': 1, 'a': []}", 0, nullptr, false},
        Case{"{'_id': 1}", "{'$pop': {'a': 1}}", "{'_id': 1}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 1}", "{'$pop': {'a': 1}}", nullptr, 14,
             "Path 'a' contains an element of non-array type 'int'"},
        Case{"{'_id': 1, 'a': [1, 2, 1, 3]}", "{'$pullAll': {'a': [1, 3]}}",
             "{'_id': 1, 'a': [2]}"},
        Case{"{'_id': 1, 'a': 1}", "{'$pullAll': {'a': [1]}}", nullptr, 2,
             "Cannot apply $pull to a non-array value"},
        Case{"{'_id': 1, 'a': [1, 2, 1]}", "{'$pull': {'a': 1}}", "{'_id': 1, 'a': [2]}"},
        Case{"{'_id': 1, 'a': [1, 2, 1]}", "{'$pull': {'a': 5}}", "{'_id': 1, 'a': [1, 2, 1]}", 0,
             nullptr, false},
        Case{"{'_id': 1, 's': [3, 6, 9, 'x']}", "{'$pull': {'s': {'$gte': 6}}}",
             "{'_id': 1, 's': [3, 'x']}"},
        Case{"{'_id': 1, 's': [3, 6, 9]}", "{'$pull': {'s': {'$in': [3, 9]}}}",
             "{'_id': 1, 's': [6]}"},
        Case{"{'_id': 1, 'r': [{'i': 'A', 'n': 1}, {'i': 'B', 'n': 2}, 5]}",
             "{'$pull': {'r': {'i': 'B'}}}", "{'_id': 1, 'r': [{'i': 'A', 'n': 1}, 5]}"},
        Case{"{'_id': 1, 'r': [{'n': 1}, {'n': 7}]}", "{'$pull': {'r': {'n': {'$gt': 5}}}}",
             "{'_id': 1, 'r': [{'n': 1}]}"},
        Case{"{'_id': 1, 'r': [[1, 2], [3]]}", "{'$pull': {'r': [1, 2]}}",
             "{'_id': 1, 'r': [[3]]}"},
        Case{"{'_id': 1, 'r': [{'s': [1, 9]}, {'s': [2]}]}",
             "{'$pull': {'r': {'s': {'$elemMatch': {'$gt': 5}}}}}",
             "{'_id': 1, 'r': [{'s': [2]}]}"},
        Case{"{'_id': 1, 'a': ['ab', 'cd', 1]}", "{'$pull': {'a': {'$regex': '^a'}}}",
             "{'_id': 1, 'a': ['cd', 1]}"},
        Case{"{'_id': 1, 'a': 1}", "{'$pull': {'a.b': 1}}", "{'_id': 1, 'a': 1}", 0, nullptr,
             false}));

// ------------------------------------------------------ positional operators
INSTANTIATE_TEST_SUITE_P(
    Positional, UpdateTable,
    testing::Values(
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$set': {'a.$': 9}}", "{'_id': 1, 'a': [1, 9, 3]}", 0,
             nullptr, true, nullptr, "1"},
        Case{"{'_id': 1, 'a': [{'b': 1}, {'b': 2}]}", "{'$inc': {'a.$.b': 10}}",
             "{'_id': 1, 'a': [{'b': 1}, {'b': 12}]}", 0, nullptr, true, nullptr, "1"},
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$set': {'a.$': 9}}", nullptr, 2,
             "The positional operator did not find the match needed from the query."},
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$set': {'a.$': 9, 'a.1': 8}}", nullptr, 40,
             "Update created a conflict at 'a.1'", true, nullptr, "1"},
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$inc': {'a.$[]': 10}}",
             "{'_id': 1, 'a': [11, 12, 13]}"},
        Case{"{'_id': 1, 'a': []}", "{'$inc': {'a.$[]': 10}}", "{'_id': 1, 'a': []}", 0, nullptr,
             false},
        Case{"{'_id': 1, 'a': [{'b': 1}, {'b': 2}]}", "{'$set': {'a.$[].c': 0}}",
             "{'_id': 1, 'a': [{'b': 1, 'c': 0}, {'b': 2, 'c': 0}]}"},
        Case{"{'_id': 1, 'a': [1, 2, 3]}", "{'$set': {'a.$[x]': 0}}", "{'_id': 1, 'a': [1, 0, 0]}",
             0, nullptr, true, "[{'x': {'$gt': 1}}]"},
        Case{"{'_id': 1, 'g': [{'grade': 80}, {'grade': 90}]}", "{'$set': {'g.$[e].ok': true}}",
             "{'_id': 1, 'g': [{'grade': 80}, {'grade': 90, 'ok': true}]}", 0, nullptr, true,
             "[{'e.grade': {'$gte': 85}}]"},
        Case{"{'_id': 1, 'm': [[1, 5], [7]]}", "{'$set': {'m.$[o].$[i]': 0}}",
             "{'_id': 1, 'm': [[1, 0], [0]]}", 0, nullptr, true,
             "[{'o': {'$exists': true}}, {'i': {'$gte': 5}}]"},
        Case{"{'_id': 1, 'a': [{'b': 1}]}", "{'$set': {'a.$[].b': 1, 'a.$[x].b': 2}}", nullptr, 40,
             "Update created a conflict at 'a.0.b'", true, "[{'x.b': 1}]"},
        Case{"{'_id': 1, 'a': [{'b': 1}]}", "{'$set': {'a.$[].c': 1, 'a.$[x].d': 2}}",
             "{'_id': 1, 'a': [{'b': 1, 'c': 1, 'd': 2}]}", 0, nullptr, true, "[{'x.b': 1}]"},
        Case{"{'_id': 1}", "{'$set': {'a.$[].b': 1}}", nullptr, 2,
             "The path 'a' must exist in the document in order to apply array updates."},
        Case{"{'_id': 1, 'a': [{'b': [1, 2]}, {'b': [2, 3]}]}", "{'$pull': {'a.$[].b': 2}}",
             "{'_id': 1, 'a': [{'b': [1]}, {'b': [3]}]}"},
        Case{"{'_id': 1, 'a': [{'b': [1, 2]}, {'b': [2, 3]}]}", "{'$push': {'a.$.b': 9}}",
             "{'_id': 1, 'a': [{'b': [1, 2]}, {'b': [2, 3, 9]}]}", 0, nullptr, true, nullptr, "1"},
        Case{"{'_id': 1, 'a': [{'b': 1}, {'b': 2}]}", "{'$unset': {'a.$[x]': 1}}",
             "{'_id': 1, 'a': [{'b': 1}, null]}", 0, nullptr, true, "[{'x.b': 2}]"},
        Case{"{'_id': 1, 'a': [1, 2]}", "{'$set': {'a.$[x]': 0}}", "{'_id': 1, 'a': [1, 2]}", 0,
             nullptr, false, "[{'x': {'$gt': 5}}]"},
        Case{"{'_id': 1, 'a': 5}", "{'$set': {'a.$[]': 1}}", nullptr, 2,
             "Cannot apply array updates to non-array element a: 5"}));

// ---------------------------------------------------------------- replacement
INSTANTIATE_TEST_SUITE_P(
    Replacement, UpdateTable,
    testing::Values(
        Case{"{'_id': 1, 'a': 1}", "{'b': 2}", "{'_id': 1, 'b': 2}"},
        Case{"{'_id': 1, 'a': 1}", "{}", "{'_id': 1}"},
        Case{"{'_id': 1, 'a': 1}", "{'a': 1}", "{'_id': 1, 'a': 1}", 0, nullptr, false},
        Case{"{'_id': 1, 'a': 1}", "{'b': 2, '_id': 1}", "{'_id': 1, 'b': 2}"},
        Case{
            "{'_id': 1, 'a': 1}", "{'_id': 2}", nullptr, 66,
            "After applying the update, the (immutable) field '_id' was found to have been altered "
            "to _id: 2"},
        Case{"{'_id': 1}", "{'a': 1, '$set': {'b': 1}}", nullptr, 52},
        Case{"{'a': 1}", "{'_id': [1]}", nullptr, 53, "The '_id' value cannot be of type array"},
        Case{"{'_id': 1}", "{'a': {'$x': 1}}", "{'_id': 1, 'a': {'$x': 1}}"}));

// ------------------------------------------------------------------ upserts

TEST(Upsert, SeedsFromEqualities) {
    auto seed = seedUpsertDocument(
        J("{'b.c': 2, 'a': 1, '_id': 5, '$and': [{'d': 3}], 'e': {'$eq': 4}, 'f': {'$gt': 1}}")
            .get());
    EXPECT_EQ(canonical(seed.get()),
              canonical(J("{'_id': 5, 'a': 1, 'b': {'c': 2}, 'd': 3, 'e': 4}").get()));
}

TEST(Upsert, OverlappingPathsFail) {
    try {
        (void)seedUpsertDocument(J("{'a': 1, 'a.b': 2}").get());
        FAIL() << "expected NotSingleValueField";
    } catch (const DBException& e) {
        EXPECT_EQ(e.code(), ErrorCode::NotSingleValueField);
    }
}

TEST(Upsert, AppliesSetOnInsertAndKeepsQueryFields) {
    auto d = UpdateDriver::parse(J("{'$set': {'x': 1}, '$setOnInsert': {'y': 2}}").get());
    ASSERT_TRUE(d.isOK());
    auto r = d.getValue()->applyUpsert(J("{'_id': 7, 'q': 'a'}").get(), {});
    EXPECT_EQ(canonical(r.newDoc.get()),
              canonical(J("{'_id': 7, 'q': 'a', 'x': 1, 'y': 2}").get()));
    EXPECT_TRUE(r.modified);
}

TEST(Upsert, ReplacementKeepsQueryId) {
    auto d = UpdateDriver::parse(J("{'v': 1}").get());
    ASSERT_TRUE(d.isOK());
    auto r = d.getValue()->applyUpsert(J("{'_id': 7, 'q': 'a'}").get(), {});
    EXPECT_EQ(canonical(r.newDoc.get()), canonical(J("{'_id': 7, 'v': 1}").get()));
}

TEST(Upsert, ReplacementWithOtherIdFails) {
    auto d = UpdateDriver::parse(J("{'_id': 8}").get());
    ASSERT_TRUE(d.isOK());
    try {
        (void)d.getValue()->applyUpsert(J("{'_id': 7}").get(), {});
        FAIL();
    } catch (const DBException& e) {
        EXPECT_EQ(e.code(), ErrorCode::ImmutableField);
    }
}

TEST(Upsert, SetIdAllowedWithoutQueryId) {
    auto d = UpdateDriver::parse(J("{'$set': {'_id': 3, 'a': 1}}").get());
    ASSERT_TRUE(d.isOK());
    auto r = d.getValue()->applyUpsert(J("{'a': {'$gt': 0}}").get(), {});
    EXPECT_EQ(canonical(r.newDoc.get()), canonical(J("{'_id': 3, 'a': 1}").get()));
}

TEST(Upsert, PositionalFails) {
    auto d = UpdateDriver::parse(J("{'$set': {'a.$': 1}}").get());
    ASSERT_TRUE(d.isOK());
    EXPECT_TRUE(d.getValue()->needsPositional());
    ApplyOptions o;
    o.positionalIndex = "0";  // ignored for inserts
    try {
        (void)d.getValue()->applyUpsert(J("{'a': 1}").get(), o);
        FAIL();
    } catch (const DBException& e) {
        EXPECT_EQ(e.code(), ErrorCode::BadValue);
    }
}

// -------------------------------------------------------------- descriptions

UpdateDescription describe(const char* doc, const char* update) {
    auto d = UpdateDriver::parse(J(update).get());
    EXPECT_TRUE(d.isOK()) << d.getStatus().toString();
    ApplyOptions o;
    o.computeDescription = true;
    auto r = d.getValue()->apply(J(doc).get(), o);
    EXPECT_TRUE(r.description.has_value());
    return std::move(*r.description);
}

TEST(Description, SetUnsetRename) {
    auto d = describe("{'_id': 1, 'a': {'b': 1}, 'c': 1, 'r': 5}",
                      "{'$set': {'a.b': 2, 'n': 1}, '$unset': {'c': 1}, '$rename': {'r': 's'}}");
    EXPECT_EQ(canonical(d.updatedFields.get()), canonical(J("{'a.b': 2, 'n': 1, 's': 5}").get()));
    EXPECT_EQ(d.removedFields, (std::vector<std::string>{"c", "r"}));
    EXPECT_TRUE(d.truncatedArrays.empty());
}

TEST(Description, ArrayChanges) {
    auto d =
        describe("{'_id': 1, 'a': [1, 2, 3], 'b': [1]}", "{'$pop': {'a': 1}, '$push': {'b': 2}}");
    EXPECT_EQ(canonical(d.updatedFields.get()), canonical(J("{'b.1': 2}").get()));
    ASSERT_EQ(d.truncatedArrays.size(), 1u);
    EXPECT_EQ(d.truncatedArrays[0].first, "a");
    EXPECT_EQ(d.truncatedArrays[0].second, 2u);
}

TEST(Description, NoopHasNoDescription) {
    auto d = UpdateDriver::parse(J("{'$set': {'a': 1}}").get());
    ApplyOptions o;
    o.computeDescription = true;
    auto r = d.getValue()->apply(J("{'_id': 1, 'a': 1}").get(), o);
    EXPECT_FALSE(r.modified);
    EXPECT_FALSE(r.description.has_value());
}

TEST(Validation, DocumentTooLarge) {
    std::string big(9 * 1024 * 1024, 'x');
    bson::Doc upd;
    bson_t set;
    bson_append_document_begin(upd.mut(), "$set", 4, &set);
    BSON_APPEND_UTF8(&set, "a", big.c_str());
    BSON_APPEND_UTF8(&set, "b", big.c_str());
    bson_append_document_end(upd.mut(), &set);
    auto d = UpdateDriver::parse(upd.get());
    ASSERT_TRUE(d.isOK());
    auto r = d.getValue()->tryApply(J("{'_id': 1}").get(), {});
    EXPECT_EQ(r.getStatus().code(), ErrorCode::BSONObjectTooLarge);
}

}  // namespace
}  // namespace halo::update
