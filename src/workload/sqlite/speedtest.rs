//! The RL Benchmark's SQLite tests: the sixteen tests of sqlite.org/speed.html ("Database Speed
//! Comparison", the tcl script that generates them), which Android's "RL Benchmark: SQLite" app
//! runs. Each test is one operation of the app's results (`test1` .. `test16`), its statements
//! generated here with the page's shapes: numbers from a seeded random stream and the same
//! numbers spelled in English words.
//!
//! `scale` multiplies every row count (1.0: 1000 and 25000 rows as on the page); the tests'
//! order and transactions are the page's.

use crate::sim::rng::Rng;

/// English words for `n` (speed.html's `number_name`), e.g. 13153 -> "thirteen thousand one
/// hundred fifty three".
pub fn number_name(n: u64) -> String {
    const ONES: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = [
        "", "ten", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    let mut words = Vec::new();
    let mut n = n;
    if n >= 1000 {
        words.push(number_name(n / 1000));
        words.push("thousand".to_string());
        n %= 1000;
    }
    if n >= 100 {
        words.push(ONES[(n / 100) as usize].to_string());
        words.push("hundred".to_string());
        n %= 100;
    }
    if n >= 20 {
        words.push(TENS[(n / 10) as usize].to_string());
        n %= 10;
    }
    if n > 0 || words.is_empty() {
        words.push(ONES[n as usize].to_string());
    }
    words.join(" ")
}

/// One test: its name in the results and the SQL the app runs for it, in the order run. Each
/// element of `batches` is one call into SQLite (one autocommit statement, or a whole
/// `BEGIN ... COMMIT`).
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    pub name: &'static str,
    pub title: &'static str,
    pub batches: Vec<String>,
}

/// Whether `scale` makes speed.html's smallest count (100) round to zero (then [`scaled`]
/// raises it to 1).
pub fn scaled_below_one(scale: f64) -> bool {
    (100.0 * scale).round() < 1.0
}

fn scaled(count: u64, scale: f64) -> u64 {
    ((count as f64 * scale).round() as u64).max(1)
}

/// The statements, one a line.
fn lines(statements: impl IntoIterator<Item = String>) -> String {
    statements.into_iter().map(|s| s + "\n").collect()
}

/// The statements in one transaction: one call into SQLite.
fn transaction(statements: impl IntoIterator<Item = String>) -> String {
    format!("BEGIN;\n{}COMMIT;", lines(statements))
}

fn test(name: &'static str, title: &'static str, batches: Vec<String>) -> Test {
    Test {
        name,
        title,
        batches,
    }
}

/// The sixteen tests at `scale`, numbers drawn from `seed`.
pub fn tests(scale: f64, seed: u64) -> Vec<Test> {
    let mut random = Rng::named(seed, "speedtest");
    let n1 = scaled(1000, scale);
    let n2 = scaled(25000, scale);
    let selects = scaled(100, scale);
    let indexed_selects = scaled(5000, scale);
    let insert = |random: &mut Rng, table: &str, i: u64| {
        let r = random.below(100_000);
        format!("INSERT INTO {table} VALUES({i},{r},'{}');", number_name(r))
    };
    let create =
        |table: &str| format!("CREATE TABLE {table}(a INTEGER, b INTEGER, c VARCHAR(100));");
    let mut tests = Vec::new();
    // Test 1: autocommit, one call per statement.
    let mut batches = vec![create("t1")];
    batches.extend((1..=n1).map(|i| insert(&mut random, "t1", i)));
    tests.push(test("test1", "1000 INSERTs", batches));
    let sql = transaction(
        std::iter::once(create("t2")).chain((1..=n2).map(|i| insert(&mut random, "t2", i))),
    );
    tests.push(test("test2", "25000 INSERTs in a transaction", vec![sql]));
    let sql = transaction(
        [create("t3"), "CREATE INDEX i3 ON t3(c);".to_string()]
            .into_iter()
            .chain((1..=n2).map(|i| insert(&mut random, "t3", i))),
    );
    tests.push(test(
        "test3",
        "25000 INSERTs into an indexed table",
        vec![sql],
    ));
    let sql = transaction((0..selects).map(|i| {
        let lo = (i * 100) % 10_000;
        format!(
            "SELECT count(*), avg(b) FROM t2 WHERE b>={lo} AND b<{};",
            lo + 1000
        )
    }));
    tests.push(test("test4", "100 SELECTs without an index", vec![sql]));
    let sql = transaction((0..selects).map(|i| {
        format!(
            "SELECT count(*), avg(b) FROM t2 WHERE c LIKE '%{}%';",
            number_name(i + 1)
        )
    }));
    tests.push(test(
        "test5",
        "100 SELECTs on a string comparison",
        vec![sql],
    ));
    tests.push(test(
        "test6",
        "Creating an index",
        vec!["CREATE INDEX i2a ON t2(a);\nCREATE INDEX i2b ON t2(b);".to_string()],
    ));
    let sql = lines((0..indexed_selects).map(|i| {
        let lo = (i * 100) % 100_000;
        format!(
            "SELECT count(*), avg(b) FROM t2 WHERE b>={lo} AND b<{};",
            lo + 100
        )
    }));
    tests.push(test("test7", "5000 SELECTs with an index", vec![sql]));
    let sql = transaction((0..n1).map(|i| {
        format!(
            "UPDATE t1 SET b=b*2 WHERE a>={} AND a<{};",
            i * 10,
            i * 10 + 10
        )
    }));
    tests.push(test("test8", "1000 UPDATEs without an index", vec![sql]));
    let sql = transaction(
        (1..=n2).map(|i| format!("UPDATE t2 SET b={} WHERE a={i};", random.below(500_000))),
    );
    tests.push(test("test9", "25000 UPDATEs with an index", vec![sql]));
    let sql = transaction((1..=n2).map(|i| {
        format!(
            "UPDATE t2 SET c='{}' WHERE a={i};",
            number_name(random.below(500_000))
        )
    }));
    tests.push(test(
        "test10",
        "25000 text UPDATEs with an index",
        vec![sql],
    ));
    let sql = transaction([
        "INSERT INTO t1 SELECT b,a,c FROM t2;".to_string(),
        "INSERT INTO t2 SELECT b,a,c FROM t1;".to_string(),
    ]);
    tests.push(test("test11", "INSERTs from a SELECT", vec![sql]));
    tests.push(test(
        "test12",
        "DELETE without an index",
        vec!["DELETE FROM t2 WHERE c LIKE '%fifty%';".to_string()],
    ));
    tests.push(test(
        "test13",
        "DELETE with an index",
        vec!["DELETE FROM t2 WHERE a>10 AND a<20000;".to_string()],
    ));
    tests.push(test(
        "test14",
        "A big INSERT after a big DELETE",
        vec!["INSERT INTO t2 SELECT * FROM t1;".to_string()],
    ));
    let sql = transaction(
        std::iter::once("DELETE FROM t1;".to_string())
            .chain((1..=scaled(12_000, scale)).map(|i| insert(&mut random, "t1", i))),
    );
    tests.push(test(
        "test15",
        "A big DELETE followed by many small INSERTs",
        vec![sql],
    ));
    tests.push(test(
        "test16",
        "DROP TABLE",
        vec!["DROP TABLE t1;\nDROP TABLE t2;\nDROP TABLE t3;".to_string()],
    ));
    tests
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_spelled_as_speed_html_does() {
        assert_eq!(
            number_name(13153),
            "thirteen thousand one hundred fifty three"
        );
        assert_eq!(number_name(0), "zero");
        assert_eq!(number_name(100), "one hundred");
        assert_eq!(number_name(20), "twenty");
        assert_eq!(number_name(100_000), "one hundred thousand");
    }

    #[test]
    fn the_sixteen_tests_scale_their_row_counts() {
        let full = tests(1.0, 1);
        assert_eq!(full.len(), 16);
        assert_eq!(
            full[0].batches.len(),
            1001,
            "CREATE + 1000 autocommit INSERTs"
        );
        assert_eq!(full[1].batches[0].matches("INSERT INTO t2").count(), 25000);
        let small = tests(0.01, 1);
        assert_eq!(small[0].batches.len(), 11);
        assert_eq!(
            tests(0.01, 1),
            small,
            "the same seed gives the same statements"
        );
        assert_ne!(tests(0.01, 2)[0].batches[1], small[0].batches[1]);
    }
}
