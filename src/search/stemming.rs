//! A token filter that stems like tantivy's English `Stemmer` but remembers each word's stem,
//! so a word is run through the Snowball algorithm once per analyzer instance instead of once
//! per occurrence (stemming was a quarter of full-sync CPU). Output is identical by
//! construction: a cache miss asks tantivy's own stemmer.

use rustc_hash::FxHashMap;

use tantivy::tokenizer::{Language, RawTokenizer, Stemmer, TextAnalyzer, Token, TokenFilter, TokenStream, Tokenizer};

/// Words remembered per analyzer instance before the memo starts over: bounds memory to a few
/// MB per field analyzer, and the frequent words (most tokens) come back after a reset.
const MEMO_WORDS_MAX: usize = 50_000;

/// English stemming with a per-instance memo of word → stem.
#[derive(Clone, Default)]
pub struct CachedEnglishStemmer;

impl TokenFilter for CachedEnglishStemmer {
    type Tokenizer<T: Tokenizer> = CachedStemmerFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> CachedStemmerFilter<T> {
        CachedStemmerFilter { inner: tokenizer, memo: StemMemo::default() }
    }
}

/// Word → stem, computed by tantivy's stemmer on a miss.
#[derive(Clone)]
struct StemMemo {
    stems: FxHashMap<String, String>,
    stemmer: TextAnalyzer,
}

impl Default for StemMemo {
    fn default() -> Self {
        StemMemo {
            stems: FxHashMap::default(),
            stemmer: TextAnalyzer::builder(RawTokenizer::default()).filter(Stemmer::new(Language::English)).build(),
        }
    }
}

impl StemMemo {
    fn stem_into(&mut self, text: &mut String) {
        if let Some(stem) = self.stems.get(text.as_str()) {
            text.clone_from(stem);
            return;
        }
        let mut stream = self.stemmer.token_stream(text);
        let stem = if stream.advance() { stream.token().text.clone() } else { text.clone() };
        drop(stream);
        if self.stems.len() >= MEMO_WORDS_MAX {
            self.stems.clear();
        }
        self.stems.insert(std::mem::replace(text, stem.clone()), stem);
    }
}

#[derive(Clone)]
pub struct CachedStemmerFilter<T> {
    inner: T,
    memo: StemMemo,
}

impl<T: Tokenizer> Tokenizer for CachedStemmerFilter<T> {
    type TokenStream<'a> = CachedStemmerStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        CachedStemmerStream { tail: self.inner.token_stream(text), memo: &mut self.memo }
    }
}

pub struct CachedStemmerStream<'a, T> {
    tail: T,
    memo: &'a mut StemMemo,
}

impl<T: TokenStream> TokenStream for CachedStemmerStream<'_, T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        self.memo.stem_into(&mut self.tail.token_mut().text);
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}
