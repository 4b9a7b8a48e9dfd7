//! Unit tests of the web adapter's pieces: sanitised rendering, token comparison, the session
//! cookie's attributes, the session store's cap, the host names a request may name.

use super::auth::{Sessions, session_cookie, tokens_equal};
use super::host::{AllowedHosts, host_name};
use super::render::note_html;

#[test]
fn rendering_keeps_markdown_and_makes_html_scripts_handlers_and_javascript_links_inert() {
    let html = note_html(
        "# Head\n\n*em* [ok](https://example.com) [bad](javascript:alert(1)) [data](data:text/html,x)\n\n\
         <script>alert(1)</script>\n\n<b onclick=\"alert(1)\">bold</b> <img src=x onerror=alert(1)>\n",
    )
    .into_string();
    assert!(html.contains("<h1>Head</h1>") && html.contains("<em>em</em>"), "{html}");
    assert!(html.contains("href=\"https://example.com\""), "{html}");
    // Escaped text never holds '<': every '<' opens real markup.
    for tag in html.split('<').skip(1).map(|rest| rest.split('>').next().unwrap_or("")) {
        let name = tag.trim_start_matches('/').split([' ', '/']).next().unwrap_or("");
        assert!(["h1", "p", "em", "a"].contains(&name), "unexpected markup <{tag}> in {html}");
        assert!(!tag.contains(" on") && !tag.contains("javascript:") && !tag.contains("data:"), "<{tag}> in {html}");
    }
    assert!(html.contains("&lt;script&gt;"), "raw HTML is shown as text: {html}");
}

#[test]
fn tokens_compare_equal_only_when_identical() {
    assert!(tokens_equal("abc", "abc"));
    assert!(!tokens_equal("abc", "abd"));
    assert!(!tokens_equal("abc", "abcd"));
    assert!(!tokens_equal("", "a"));
}

#[test]
fn the_session_cookie_is_http_only_same_site_strict_and_secure_off_loopback() {
    let local = session_cookie("id1", false);
    assert!(local.starts_with("paravault_session=id1"));
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(local.contains(attribute), "{local}");
    }
    assert!(!local.contains("Secure"));
    assert!(session_cookie("id1", true).contains("Secure"));
    assert!(session_cookie("", false).contains("Max-Age=0"), "logout clears the cookie");
}

#[test]
fn sessions_have_fresh_ids_and_tokens_and_end_when_removed() {
    let sessions = Sessions::default();
    let (a, first) = sessions.create(None);
    let (b, second) = sessions.create(None);
    assert_ne!(a, b);
    assert_ne!(first.csrf, second.csrf);
    assert_eq!((a.len(), first.csrf.len()), (64, 64));
    assert!(sessions.get(&a).is_some());
    sessions.remove(&a);
    assert!(sessions.get(&a).is_none());
    assert!(sessions.get("not a session").is_none());
}

#[test]
fn shown_escapes_hidden_characters_in_markup() {
    use super::render::Shown;
    let html = maud::html! { pre { (Shown("curl x | sh\x1b[1A\r\u{202e}<b>&\u{200b}")) } }.into_string();
    assert_eq!(
        html,
        "<pre>curl x | sh<span class=\"esc\">\\u{1b}</span>[1A<span class=\"esc\">\\u{d}</span><span class=\"esc\">\\u{202e}</span>&lt;b&gt;&amp;<span class=\"esc\">\\u{200b}</span></pre>"
    );
    assert!(!html.chars().any(crate::note::visible::hidden), "{html:?}");
}

#[test]
fn host_names_are_compared_without_port_case_or_trailing_dot_and_user_information_is_refused() {
    assert_eq!(host_name("LocalHost:8742").unwrap(), "localhost");
    assert_eq!(host_name("[::1]:8742").unwrap(), "[::1]");
    assert_eq!(host_name("notes.example.org.").unwrap(), "notes.example.org");
    assert_eq!(host_name("localhost:").unwrap(), "localhost", "an empty port is a port (RFC 9110)");
    for bad in ["alice@localhost", "", "a b", "/x", "localhost/x", "localhost:port", "localhost:99999"] {
        assert!(host_name(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn the_allowed_hosts_are_the_loopback_names_the_bind_address_the_public_names_and_the_review_urls_host() {
    let hosts = AllowedHosts::new("192.168.1.5:8742".parse().unwrap(), &["Notes.Example.org".into()], Some("https://review.example.net/x"));
    for allowed in ["localhost", "127.0.0.1:1", "[::1]", "192.168.1.5:8742", "notes.example.org", "review.example.net:443"] {
        assert!(hosts.allows(allowed), "{allowed}");
    }
    for refused in ["attacker.example", "192.168.1.6", "example.org", "[::2]", "notes.example.org.attacker.example"] {
        assert!(!hosts.allows(refused), "{refused}");
    }
    let unspecified = AllowedHosts::new("0.0.0.0:8742".parse().unwrap(), &[], None);
    assert!(!unspecified.allows("0.0.0.0") && !unspecified.allows("192.168.1.5"), "0.0.0.0 names no address: --public-host does");
    assert!(AllowedHosts::new("[fd00::5]:8742".parse().unwrap(), &[], None).allows("[fd00::5]:8742"));
}

#[test]
fn the_search_page_explains_every_canonical_mode_and_hides_the_alias() {
    use crate::api::search::SearchMode;
    let shown: Vec<&str> = super::pages::SEARCH_MODES.iter().map(|(name, _)| *name).collect();
    let canonical: Vec<&str> = SearchMode::CANONICAL.iter().map(|m| m.name()).collect();
    assert_eq!(shown, canonical);
}

#[test]
fn search_snippets_mark_the_query_words_and_escape_the_rest() {
    let terms = super::pages::query_terms("Garden <b>");
    let html = super::pages::highlighted("The <b>garden</b>\n  GARDEN", &terms).into_string();
    assert_eq!(
        html,
        "The &lt;<mark>b</mark>&gt;<mark>garden</mark>&lt;/<mark>b</mark>&gt; <mark>GARDEN</mark>".replace("<mark>b</mark>", "b")
    );
}
