"""A search backend that indexes nothing.

Every thread and comment the forum saves is indexed into a search engine
(Elasticsearch, Meilisearch or Typesense), none of which Debian packages. This
backend accepts the documents and drops them, so a load test measures the forum
and its database and not a search engine; searching answers no threads.
"""

from forum.search import base


class Documents(base.BaseDocumentSearchBackend):
    def index_document(self, index_name, doc_id, document):
        pass

    def update_document(self, index_name, doc_id, update_data):
        pass

    def delete_document(self, index_name, doc_id):
        pass


class Indices(base.BaseIndexSearchBackend):
    def initialize_indices(self, force_new_index=False):
        pass

    def rebuild_indices(self, batch_size=500, extra_catchup_minutes=5):
        pass

    def validate_indices(self):
        pass

    def refresh_indices(self):
        pass

    def delete_unused_indices(self):
        return 0


class Threads(base.BaseThreadSearchBackend):
    def get_thread_ids(self, *args, **kwargs):
        return []

    def get_suggested_text(self, search_text):
        return None


class NoSearch(base.BaseSearchBackend):
    DOCUMENT_SEARCH_CLASS = Documents
    INDEX_SEARCH_CLASS = Indices
    THREAD_SEARCH_CLASS = Threads
