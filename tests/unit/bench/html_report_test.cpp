#include "bench/html_report.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace halo::bench {
namespace {

const char* kRun =
    R"({"label":"x","operations":{"READ":{"ok":3,"failed":0,"p50_us":10,"p95_us":20,"p99_us":30,"p999_us":40,"max_us":50,"mean_us":12.0}},"per_second":[1,2]})";

TEST(HtmlReportTest, OneSelfContainedPageWithTheDataAndThePlotMarkers) {
    ReportPage page;
    page.title = "T <1>";
    page.summary = "a & b";
    page.sections.push_back({"shop", "notes", {{"alone #1", kRun}, {"tiered #1", kRun}}});
    std::string html = renderHtml(page);
    EXPECT_NE(html.find("<title>T &lt;1&gt;</title>"), std::string::npos);
    EXPECT_NE(html.find("<pre>a &amp; b</pre>"), std::string::npos);
    EXPECT_NE(html.find("data-section=\"0\""), std::string::npos);
    EXPECT_NE(html.find("'data-plot': plot"), std::string::npos);  // drawn by the page script
    EXPECT_NE(html.find("\"label\":\"tiered #1\""), std::string::npos);
    EXPECT_NE(html.find("data-rendered=\"no\""), std::string::npos);
    // Nothing fetched from anywhere: no external scripts, styles or images.
    EXPECT_EQ(html.find("src="), std::string::npos);
    EXPECT_EQ(html.find("href="), std::string::npos);
    EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
}

TEST(HtmlReportTest, EmbeddedJsonCannotCloseItsScriptElement) {
    ReportPage page;
    std::string evil = R"({"label":"</script><b>","operations":{},"per_second":[]})";
    page.sections.push_back({"s", "", {{"a</script>", evil}}});
    std::string html = renderHtml(page);
    auto body = html.substr(html.find("<section"));
    body = body.substr(0, body.find("</section>"));
    // The only </script> inside the section is the one closing the data element.
    EXPECT_EQ(body.find("</script>"), body.rfind("</script>"));
    EXPECT_NE(body.find("<\\/script>"), std::string::npos);
}

TEST(HtmlReportTest, RepeatsOfOneSystemShareAColourAndAreDashed) {
    ReportPage page;
    page.sections.push_back(
        {"s", "", {{"alone #1", kRun}, {"tiered #1", kRun}, {"alone #2", kRun}}});
    std::string html = renderHtml(page);
    EXPECT_NE(html.find(R"("label":"alone #1","colorIndex":0,"dashed":false)"), std::string::npos);
    EXPECT_NE(html.find(R"("label":"tiered #1","colorIndex":1,"dashed":false)"), std::string::npos);
    EXPECT_NE(html.find(R"("label":"alone #2","colorIndex":0,"dashed":true)"), std::string::npos);
}

TEST(HtmlReportTest, ReadRunFileTakesTheLabelOrTheFileNameAndRejectsOtherJson) {
    std::string dir = ::testing::TempDir();
    std::string labelled = dir + "/labelled.json", bare = dir + "/bare-run.json",
                other = dir + "/other.json", broken = dir + "/broken.json";
    std::ofstream(labelled) << kRun;
    std::ofstream(bare) << R"({"operations":{},"per_second":[]})";
    std::ofstream(other) << R"({"mode":"ramp"})";
    std::ofstream(broken) << "{nope";
    auto a = readRunFile(labelled);
    ASSERT_TRUE(a.isOK());
    EXPECT_EQ(a.getValue().label, "x");
    auto b = readRunFile(bare);
    ASSERT_TRUE(b.isOK());
    EXPECT_EQ(b.getValue().label, "bare-run");
    EXPECT_FALSE(readRunFile(other).isOK());
    EXPECT_FALSE(readRunFile(broken).isOK());
    EXPECT_FALSE(readRunFile(dir + "/missing.json").isOK());
    for (const auto& p : {labelled, bare, other, broken}) std::remove(p.c_str());
}

}  // namespace
}  // namespace halo::bench
