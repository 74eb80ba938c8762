//! The RL Benchmark's SQLite tests: the sixteen tests of sqlite.org/speed.html ("Database Speed
//! Comparison", the tcl script that generates them), which Android's "RL Benchmark: SQLite" app
//! runs. Each test is one operation of the app's results (`test1` .. `test16`), its statements
//! generated here with the page's shapes: numbers from a seeded random stream and the same
//! numbers spelled in English words.
//!
//! `scale` multiplies every row count (1.0: 1000 and 25000 rows as on the page); the tests'
//! order and transactions are the page's.

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

/// A small seeded stream (splitmix64) for the tests' random numbers.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % bound.max(1)
    }
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

fn scaled(count: u64, scale: f64) -> u64 {
    ((count as f64 * scale).round() as u64).max(1)
}

/// The sixteen tests at `scale`, numbers drawn from `seed`.
pub fn tests(scale: f64, seed: u64) -> Vec<Test> {
    let mut random = Random(seed);
    let n1 = scaled(1000, scale);
    let n2 = scaled(25000, scale);
    let selects = scaled(100, scale);
    let indexed_selects = scaled(5000, scale);
    let mut tests = Vec::new();
    let insert = |random: &mut Random, table: &str, i: u64| {
        let r = random.below(100_000);
        format!("INSERT INTO {table} VALUES({i},{r},'{}');", number_name(r))
    };
    let mut batches = vec!["CREATE TABLE t1(a INTEGER, b INTEGER, c VARCHAR(100));".to_string()];
    for i in 1..=n1 {
        batches.push(insert(&mut random, "t1", i));
    }
    tests.push(Test {
        name: "test1",
        title: "1000 INSERTs",
        batches,
    });
    let mut sql = String::from("BEGIN;\nCREATE TABLE t2(a INTEGER, b INTEGER, c VARCHAR(100));\n");
    for i in 1..=n2 {
        sql.push_str(&insert(&mut random, "t2", i));
        sql.push('\n');
    }
    sql.push_str("COMMIT;");
    tests.push(Test {
        name: "test2",
        title: "25000 INSERTs in a transaction",
        batches: vec![sql],
    });
    let mut sql = String::from(
        "BEGIN;\nCREATE TABLE t3(a INTEGER, b INTEGER, c VARCHAR(100));\nCREATE INDEX i3 ON t3(c);\n",
    );
    for i in 1..=n2 {
        sql.push_str(&insert(&mut random, "t3", i));
        sql.push('\n');
    }
    sql.push_str("COMMIT;");
    tests.push(Test {
        name: "test3",
        title: "25000 INSERTs into an indexed table",
        batches: vec![sql],
    });
    let mut sql = String::from("BEGIN;\n");
    for i in 0..selects {
        let lo = (i * 100) % 10_000;
        sql.push_str(&format!(
            "SELECT count(*), avg(b) FROM t2 WHERE b>={lo} AND b<{};\n",
            lo + 1000
        ));
    }
    sql.push_str("COMMIT;");
    tests.push(Test {
        name: "test4",
        title: "100 SELECTs without an index",
        batches: vec![sql],
    });
    let mut sql = String::from("BEGIN;\n");
    for i in 0..selects {
        sql.push_str(&format!(
            "SELECT count(*), avg(b) FROM t2 WHERE c LIKE '%{}%';\n",
            number_name(i + 1)
        ));
    }
    sql.push_str("COMMIT;");
    tests.push(Test {
        name: "test5",
        title: "100 SELECTs on a string comparison",
        batches: vec![sql],
    });
    tests.push(Test {
        name: "test6",
        title: "Creating an index",
        batches: vec!["CREATE INDEX i2a ON t2(a);\nCREATE INDEX i2b ON t2(b);".to_string()],
    });
    let mut sql = String::new();
    for i in 0..indexed_selects {
        let lo = (i * 100) % 100_000;
        sql.push_str(&format!(
            "SELECT count(*), avg(b) FROM t2 WHERE b>={lo} AND b<{};\n",
            lo + 100
        ));
    }
    tests.push(Test {
        name: "test7",
        title: "5000 SELECTs with an index",
        batches: vec![sql],
    });
    let mut sql = String::from("BEGIN;\n");
    for i in 0..n1 {
        sql.push_str(&format!(
            "UPDATE t1 SET b=b*2 WHERE a>={} AND a<{};\n",
            i * 10,
            i * 10 + 10
        ));
    }
    sql.push_str("COMMIT;");
    tests.push(Test {
        name: "test8",
        title: "1000 UPDATEs without an index",
        batches: vec![sql],
    });
    let mut sql = String::from("BEGIN;\n");
    for i in 1..=n2 {
        sql.push_str(&format!(
            "UPDATE t2 SET b={} WHERE a={i};\n",
            random.below(500_000)
        ));
    }
    sql.push_str("COMMIT;");
    tests.push(Test {
        name: "test9",
        title: "25000 UPDATEs with an index",
        batches: vec![sql],
    });
    let mut sql = String::from("BEGIN;\n");
    for i in 1..=n2 {
        sql.push_str(&format!(
            "UPDATE t2 SET c='{}' WHERE a={i};\n",
            number_name(random.below(500_000))
        ));
    }
    sql.push_str("COMMIT;");
    tests.push(Test {
        name: "test10",
        title: "25000 text UPDATEs with an index",
        batches: vec![sql],
    });
    tests.push(Test {
        name: "test11",
        title: "INSERTs from a SELECT",
        batches: vec![
            "BEGIN;\nINSERT INTO t1 SELECT b,a,c FROM t2;\nINSERT INTO t2 SELECT b,a,c FROM t1;\nCOMMIT;"
                .to_string(),
        ],
    });
    tests.push(Test {
        name: "test12",
        title: "DELETE without an index",
        batches: vec!["DELETE FROM t2 WHERE c LIKE '%fifty%';".to_string()],
    });
    tests.push(Test {
        name: "test13",
        title: "DELETE with an index",
        batches: vec!["DELETE FROM t2 WHERE a>10 AND a<20000;".to_string()],
    });
    tests.push(Test {
        name: "test14",
        title: "A big INSERT after a big DELETE",
        batches: vec!["INSERT INTO t2 SELECT * FROM t1;".to_string()],
    });
    let mut sql = String::from("BEGIN;\nDELETE FROM t1;\n");
    for i in 1..=scaled(12_000, scale) {
        sql.push_str(&insert(&mut random, "t1", i));
        sql.push('\n');
    }
    sql.push_str("COMMIT;");
    tests.push(Test {
        name: "test15",
        title: "A big DELETE followed by many small INSERTs",
        batches: vec![sql],
    });
    tests.push(Test {
        name: "test16",
        title: "DROP TABLE",
        batches: vec!["DROP TABLE t1;\nDROP TABLE t2;\nDROP TABLE t3;".to_string()],
    });
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
