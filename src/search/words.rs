//! The reference's token rules (bm25s, as scikit-learn's `CountVectorizer`): a token is a run of
//! two or more word characters (`(?u)\b\w\w+\b`), a word character being a letter, a digit or
//! `_`; one-character runs are dropped. Then (in `schema::analyzer`) lower-casing, the
//! reference's English stop words and the Snowball stemmer.
//!
//! Python's `\w` is `str.isalnum()` or `_` (Unicode letters L*, numbers N*); Rust's
//! `char::is_alphanumeric` is the Alphabetic and Numeric properties, which also hold a few
//! combining marks of Indic scripts (Other_Alphabetic) that Python does not count as word
//! characters. For Latin, Greek and Cyrillic text the two agree.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// The reference's English stop words: bm25s's `STOPWORDS_EN` (Lucene's `EnglishAnalyzer`
/// list), compared with the lower-cased token before stemming.
pub(crate) const STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such",
    "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
];

/// Whether `c` is a word character of the reference's pattern (`\w`).
#[inline]
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Runs of two or more word characters. Every run, kept or not, advances the position, so a
/// dropped one-character word leaves a gap as a stop word does.
#[derive(Clone, Default)]
pub struct WordTokenizer {
    token: Token,
}

pub struct WordTokenStream<'a> {
    text: &'a str,
    at: usize,
    token: &'a mut Token,
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = WordTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordTokenStream<'a> {
        self.token.reset();
        WordTokenStream { text, at: 0, token: &mut self.token }
    }
}

impl TokenStream for WordTokenStream<'_> {
    fn advance(&mut self) -> bool {
        self.token.text.clear();
        loop {
            let rest = &self.text[self.at..];
            let Some(start) = rest.find(is_word_char) else {
                self.at = self.text.len();
                return false;
            };
            let from = self.at + start;
            let len = self.text[from..].find(|c: char| !is_word_char(c)).unwrap_or(self.text.len() - from);
            let to = from + len;
            self.at = to;
            self.token.position = self.token.position.wrapping_add(1);
            if self.text[from..to].chars().nth(1).is_some() {
                self.token.offset_from = from;
                self.token.offset_to = to;
                self.token.text.push_str(&self.text[from..to]);
                return true;
            }
        }
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}
