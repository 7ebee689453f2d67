#pragma once
// Renders values the way mongod's BSONElement::toString / BSONObj::toString do,
// so error messages match mongod's text: `a: 1`, `{ a: 1, b: "x" }`,
// `[ 1, 2 ]`, `ObjectId('...')`, `new Date(0)`, `1.5`, `2.0`.
#include <bson/bson.h>

#include <string>
#include <string_view>

namespace halo::update {

class Element;

/// One value: `1`, `"x"`, `{ a: 1 }`, `[ 1, 2 ]`.
std::string formatValue(const bson_value_t& v);
/// `name: value`, as BSONElement::toString().
std::string formatElement(std::string_view name, const bson_value_t& v);
/// `{ a: 1, b: 2 }`, as BSONObj::toString().
std::string formatDoc(const bson_t* doc);
std::string formatElement(const Element& e);

}  // namespace halo::update
